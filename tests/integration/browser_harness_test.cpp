// The headless browser the page tests drive (support/browser.hpp), on a local page: what it reads of the DOM, how it
// sees the page change, the problems it reports, and its screenshots.
#include "support/browser.hpp"
#include "support/temp_dir.hpp"

#include <chrono>
#include <cstdint>
#include <gtest/gtest.h>
#include <memory>
#include <stdexcept>
#include <string>

namespace jobman::test {
namespace browser_harness_test {

using std::chrono::seconds;

// A page with a table of two jobs whose script, 300 ms after it runs, appends a third row and then throws; it logs
// a console error while it loads and has an image that is not there.
constexpr const char* kPage = R"(<!doctype html>
<html>
<head>
<meta charset="utf-8">
<title>Jobs</title>
<style>
  body { margin: 0; font-family: sans-serif; }
  td { padding: 4px 12px; }
  #filler { height: 2000px; background: linear-gradient(#fff, #36c); }
</style>
</head>
<body>
<h1>Jobs</h1>
<table id="jobs">
  <tbody>
    <tr><td>1</td><td>train</td><td>running</td></tr>
    <tr><td>2</td><td>eval</td><td>queued</td></tr>
  </tbody>
</table>
<img src="missing.png" alt="">
<div id="filler"></div>
<script>
  console.error('quota check failed:', 3, 'of 2 chips');
  setTimeout(() => {
    const row = document.querySelector('#jobs tbody').insertRow();
    row.innerHTML = '<td>3</td><td>sweep</td><td>succeeded</td>';
    window.appended = true;
    throw new Error('row 3 has no owner');
  }, 300);
</script>
</body>
</html>
)";

constexpr const char* kRows = "document.querySelectorAll('#jobs tbody tr').length";

// The page, written to `dir`, as a file:// URL.
std::string page_url(const TempDir& dir) {
  return "file://" + dir.write("jobs.html", kPage).string();
}

// A browser with the page open; fails the test (with the reason) when there is no chromium to run.
std::unique_ptr<HeadlessBrowser> browser_on_page(const TempDir& dir, int width = 1400, int height = 900) {
  if (!HeadlessBrowser::available()) {
    ADD_FAILURE() << "no chromium to run: the page tests need Debian's chromium package (chromium on PATH) or "
                     "JOBMAN_CHROMIUM set to a Chromium program";
    return nullptr;
  }
  auto browser = std::make_unique<HeadlessBrowser>(width, height);
  browser->open(page_url(dir));
  return browser;
}

// The big-endian 32-bit number at `at` of `bytes`.
std::uint32_t big_endian(const std::string& bytes, std::size_t at) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    value = (value << 8) | static_cast<unsigned char>(bytes.at(at + i));
  }
  return value;
}

TEST(HeadlessBrowser, ReadsTheDomAndSeesItChangeWithoutAReload) {
  TempDir dir;
  const auto browser = browser_on_page(dir);
  ASSERT_TRUE(browser);

  EXPECT_EQ(browser->evaluate("document.title"), "Jobs");
  EXPECT_EQ(browser->evaluate("[...document.querySelectorAll('#jobs tbody tr:nth-child(-n+2)')]"
                              ".map(row => row.innerText.replaceAll('\\t', ' '))"),
            nlohmann::json::array({"1 train running", "2 eval queued"}));
  // Rows and whether the script has run yet, read at one moment: the machine may be slow enough for the 300 ms to
  // pass between open() and here.
  const auto before = browser->evaluate(std::string("({rows: ") + kRows + ", appended: window.appended === true})");
  EXPECT_EQ(before["rows"], before["appended"].get<bool>() ? 3 : 2) << before.dump();
  EXPECT_EQ(browser->evaluate("window.marker = 'same document'"), "same document");

  EXPECT_TRUE(browser->wait_until(std::string(kRows) + " === 3", seconds(10)));
  EXPECT_EQ(browser->evaluate("document.querySelector('#jobs tbody tr:last-child').innerText.replaceAll('\\t', ' ')"),
            "3 sweep succeeded");
  EXPECT_EQ(browser->evaluate("window.marker"), "same document");
  EXPECT_FALSE(browser->wait_until(std::string(kRows) + " === 4", std::chrono::milliseconds(300)));
  // A promise is awaited; undefined is null.
  EXPECT_EQ(browser->evaluate("new Promise(resolve => setTimeout(() => resolve(42), 50))"), 42);
  EXPECT_TRUE(browser->evaluate("undefined").is_null());
}

TEST(HeadlessBrowser, ReportsConsoleErrorsUncaughtExceptionsAndFailedRequests) {
  TempDir dir;
  const auto browser = browser_on_page(dir);
  ASSERT_TRUE(browser);
  ASSERT_TRUE(browser->wait_until("window.appended === true", seconds(10)));

  const auto problems = browser->problems();
  std::string all;
  for (const auto& line : problems) {
    all += line + "\n";
  }
  const auto url = page_url(dir);
  // Each with the line of the page it came from.
  EXPECT_NE(all.find("console.error: quota check failed: 3 of 2 chips (" + url + ":23)"), std::string::npos) << all;
  EXPECT_NE(all.find("uncaught exception: Error: row 3 has no owner (" + url + ":28)"), std::string::npos) << all;
  EXPECT_NE(all.find("request failed: net::ERR_FILE_NOT_FOUND file://" + (dir / "missing.png").string()),
            std::string::npos)
      << all;
  EXPECT_EQ(problems.size(), 3U) << all;
}

TEST(HeadlessBrowser, ThrowsTheMessageOfAnExpressionThatThrowsAndOfAFailedNavigation) {
  TempDir dir;
  const auto browser = browser_on_page(dir);
  ASSERT_TRUE(browser);

  try {
    browser->evaluate("(() => { throw new TypeError('no job 7'); })()");
    ADD_FAILURE() << "evaluate did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("TypeError: no job 7"), std::string::npos) << e.what();
  }
  try {
    browser->evaluate("Promise.reject(new Error('rejected'))");
    ADD_FAILURE() << "evaluate did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Error: rejected"), std::string::npos) << e.what();
  }
  try {
    browser->open("file://" + (dir / "not-there.html").string());
    ADD_FAILURE() << "open did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("net::ERR_FILE_NOT_FOUND"), std::string::npos) << e.what();
  }
  // The browser still works after both.
  EXPECT_EQ(browser->evaluate("6 * 7"), 42);
}

TEST(HeadlessBrowser, WritesPngScreenshotsOfTheViewportAndOfTheWholePage) {
  TempDir dir;
  const auto browser = browser_on_page(dir, 1200, 800);
  ASSERT_TRUE(browser);
  // The page's script adds a row 300 ms after it runs, which makes the page taller: the height read below and the
  // one captured must be of the same page.
  ASSERT_TRUE(browser->wait_until("window.appended === true", seconds(10)));

  browser->screenshot(dir / "viewport.png");
  const auto viewport = file_text(dir / "viewport.png");
  ASSERT_GE(viewport.size(), 24U);
  EXPECT_EQ(viewport.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(viewport.substr(12, 4), "IHDR");
  EXPECT_EQ(big_endian(viewport, 16), 1200U);
  EXPECT_EQ(big_endian(viewport, 20), 800U);

  const auto page_height = browser->evaluate("document.documentElement.scrollHeight").get<std::uint32_t>();
  ASSERT_GT(page_height, 2000U);
  browser->screenshot(dir / "page.png", /*full_page=*/true);
  const auto page = file_text(dir / "page.png");
  ASSERT_GE(page.size(), 24U);
  EXPECT_EQ(page.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(big_endian(page, 16), 1200U);
  EXPECT_EQ(big_endian(page, 20), page_height);
  // The viewport is as it was.
  EXPECT_EQ(browser->evaluate("[innerWidth, innerHeight]"), nlohmann::json::array({1200, 800}));
}

} // namespace browser_harness_test
} // namespace jobman::test
