// Task scripts: the #JOBMAN headers and their problems (tests/data/tasks/bad, each with the message its "# expect: "
// line announces), the command line's overrides, the script's own fan-out to every host, and the config document,
// which the loader reads and whose command, run by /bin/sh, writes the script byte for byte and runs it.
#include "jobman/config/loader.hpp"
#include "jobman/config/task_script.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

namespace jobman::config {
namespace config_task_script_test {

namespace fs = std::filesystem;
using test::TempDir;

fs::path tasks_dir() {
  return JOBMAN_TEST_DATA_DIR "/tasks";
}

fs::path bad_dir() {
  return tasks_dir() / "bad";
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The headers of `text`, failing the test (with the messages) when they are refused.
TaskHeaders headers_of(const std::string& text, const std::string& name = "task.sh") {
  try {
    return parse_task_headers(text, name);
  } catch (const ConfigError& e) {
    ADD_FAILURE() << "refused:\n" << e.what();
    return {};
  }
}

// The ConfigError parsing `text` throws.
ConfigError header_error(const std::string& text, const std::string& name = "task.sh") {
  try {
    parse_task_headers(text, name);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return ConfigError({});
}

// Every warning as "file:line:column: key_path: message", one a line.
std::string warnings_text(const std::vector<ConfigWarning>& warnings) {
  std::string out;
  for (const auto& w : warnings) {
    out += w.where.file + ":" + std::to_string(w.where.line) + ":" + std::to_string(w.where.column) + ": " +
           w.where.key_path + ": " + w.message + "\n";
  }
  return out;
}

// ---- Bad scripts: tests/data/tasks/bad ----

std::vector<std::string> bad_files() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(bad_dir())) {
    if (entry.path().extension() == ".sh") {
      out.push_back(entry.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The text after "# expect: " on the file's second line (the first is its #! line).
std::string expectation(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::getline(in, line);
  const std::string prefix = "# expect: ";
  return line.starts_with(prefix) ? line.substr(prefix.size()) : std::string();
}

class TaskBadScript : public ::testing::TestWithParam<std::string> {};

TEST_P(TaskBadScript, IsRefusedWithTheExpectedMessage) {
  const auto path = bad_dir() / GetParam();
  const std::string expected = expectation(path);
  ASSERT_FALSE(expected.empty()) << path << " has no '# expect: ' second line";
  const ConfigError e = header_error(read_bytes(path), GetParam());
  EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << "expected: " << expected << "\nactual:\n"
                                                                     << e.what();
  EXPECT_EQ(e.code(), ExitCode::usage);
  ASSERT_EQ(e.diagnostics().size(), 1u) << e.what();
  EXPECT_EQ(e.diagnostics()[0].where.file, GetParam());
  EXPECT_TRUE(e.diagnostics()[0].where.key_path.starts_with("#JOBMAN --")) << e.diagnostics()[0].where.key_path;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(0, info.param.size() - 3);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(TaskBadDirectory, TaskBadScript, ::testing::ValuesIn(bad_files()), test_name);

TEST(TaskBadScripts, DirectoryHoldsEveryKindOfProblem) {
  EXPECT_GE(bad_files().size(), 19u);
}

TEST(TaskBadScripts, ReadingOneNamesThePathAsGiven) {
  const std::string path = (bad_dir() / "bad-max-retries.sh").string();
  try {
    read_task_script(path);
    FAIL() << "read";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":4:23: #JOBMAN --max-retries: expected an integer, got 'three'");
  }
}

// ---- Headers ----

TEST(TaskHeaders, EveryKeyIsRead) {
  const TaskHeaders h = headers_of(read_bytes(tasks_dir() / "full.sh"), "full.sh");
  EXPECT_EQ(h.accelerator, "v4-8");
  EXPECT_EQ(h.zone, "us-central2-b");
  EXPECT_EQ(h.name, "my-task");
  EXPECT_EQ(h.tpu_version, "tpu-ubuntu2204-base");
  EXPECT_EQ(h.max_retries, 5);
  EXPECT_EQ(h.pricing, Pricing::ondemand); // jobman-lite's "standard".
  EXPECT_EQ(h.mail_user, "you@example.com");
  EXPECT_EQ(h.mail_types, (std::vector<std::string>{"BEGIN", "END", "FAIL"}));
  EXPECT_TRUE(h.mail_type_given);
  EXPECT_EQ(h.priority, -2);
  EXPECT_EQ(h.hosts, "0");
  EXPECT_EQ(h.fanout_line, 0);
  EXPECT_TRUE(h.warnings.empty()) << warnings_text(h.warnings);
  ASSERT_EQ(h.origins.size(), 10u);
  const SourceLocation& at = h.origins.at("accelerator");
  EXPECT_EQ(at.file, "full.sh");
  EXPECT_EQ(at.line, 2);
  EXPECT_EQ(at.column, 23);
  EXPECT_EQ(at.key_path, "#JOBMAN --accelerator");
  EXPECT_EQ(h.origins.at("hosts").line, 11);
  EXPECT_EQ(h.origins.at("max-retries").key_path, "#JOBMAN --max-retries");
}

TEST(TaskHeaders, NothingIsSetWithoutHeaders) {
  const TaskHeaders h = headers_of("#!/bin/sh\necho hi\n");
  EXPECT_FALSE(h.name || h.accelerator || h.zone || h.tpu_version || h.pricing || h.mail_user || h.hosts);
  EXPECT_FALSE(h.max_retries || h.priority);
  EXPECT_FALSE(h.mail_type_given);
  EXPECT_TRUE(h.mail_types.empty());
  EXPECT_TRUE(h.origins.empty());
  EXPECT_TRUE(h.warnings.empty());
}

TEST(TaskHeaders, LaterHeaderWinsWithAWarning) {
  const TaskHeaders h = headers_of("#JOBMAN --accelerator=v4-8 --zone=us-central2-b\n"
                                   "echo hi\n"
                                   "#JOBMAN --accelerator=v4-16\n");
  EXPECT_EQ(h.accelerator, "v4-16");
  EXPECT_EQ(h.origins.at("accelerator").line, 3);
  EXPECT_EQ(h.zone, "us-central2-b");
  EXPECT_EQ(warnings_text(h.warnings),
            "task.sh:3:9: #JOBMAN --accelerator: also given on line 1: this later value is used\n");
}

TEST(TaskHeaders, OnlyTheValueThatWinsIsChecked) {
  const TaskHeaders h = headers_of("#JOBMAN --max-retries=lots\n#JOBMAN --max-retries=7\n");
  EXPECT_EQ(h.max_retries, 7);
}

TEST(TaskHeaders, SeveralOptionsOnOneLine) {
  const TaskHeaders h = headers_of("#JOBMAN --accelerator=v4-8 --zone=us-central2-b --max-retries=0\n");
  EXPECT_EQ(h.accelerator, "v4-8");
  EXPECT_EQ(h.zone, "us-central2-b");
  EXPECT_EQ(h.max_retries, 0);
  EXPECT_EQ(h.origins.at("zone").column, 35);
  EXPECT_EQ(h.origins.at("max-retries").column, 63);
}

TEST(TaskHeaders, KeySpaceValueIsAccepted) {
  // An extension: jobman-lite reads "--key value" as a bare --key.
  const TaskHeaders h = headers_of("#JOBMAN --accelerator v4-32\n#JOBMAN --name train --priority 5\n");
  EXPECT_EQ(h.accelerator, "v4-32");
  EXPECT_EQ(h.origins.at("accelerator").column, 23);
  EXPECT_EQ(h.name, "train");
  EXPECT_EQ(h.priority, 5);
  EXPECT_TRUE(h.warnings.empty()) << warnings_text(h.warnings);
}

TEST(TaskHeaders, ValueKeepsEverythingAfterTheFirstEquals) {
  const TaskHeaders h = headers_of("#JOBMAN --name=a=b\n");
  EXPECT_EQ(h.name, "a=b");
}

TEST(TaskHeaders, HeaderLinesAreFoundAnywhereAndMayBeIndented) {
  const TaskHeaders h = headers_of("#!/bin/bash\n"
                                   "echo first\n"
                                   "   #JOBMAN\t--zone=us-central2-b   \r\n"
                                   "#JOBMAN --accelerator=v4-8\n");
  EXPECT_EQ(h.zone, "us-central2-b");
  EXPECT_EQ(h.origins.at("zone").line, 3);
  EXPECT_EQ(h.origins.at("zone").column, 19);
  EXPECT_EQ(h.accelerator, "v4-8");
}

TEST(TaskHeaders, LinesThatOnlyLookLikeHeadersAreNot) {
  const TaskHeaders h = headers_of("# JOBMAN --accelerator=v4-8\n"
                                   "#JOBMAN--accelerator=v4-8\n"
                                   "#JOBMANX --accelerator=v4-8\n"
                                   "#jobman --accelerator=v4-8\n"
                                   "#JOBMAN\n"
                                   "#JOBMAN   \n"
                                   "echo '#JOBMAN --accelerator=v4-8'\n");
  EXPECT_FALSE(h.accelerator);
  EXPECT_TRUE(h.warnings.empty()) << warnings_text(h.warnings);
}

TEST(TaskHeaders, UnknownKeyIsAWarningWithASuggestion) {
  const TaskHeaders h = headers_of("#JOBMAN --accelerator=v4-8\n#JOBMAN --tpu_version=v2-alpha --exclusive\n");
  EXPECT_FALSE(h.tpu_version);
  EXPECT_EQ(warnings_text(h.warnings),
            "task.sh:2:9: #JOBMAN --tpu_version: unknown key, ignored (did you mean 'tpu-version'?)\n"
            "task.sh:2:32: #JOBMAN --exclusive: unknown key, ignored (expected one of: name, accelerator, zone, "
            "tpu-version, max-retries, pricing, mail-user, mail-type, priority, hosts)\n");
}

TEST(TaskHeaders, WordsThatAreNotOptionsAreWarnings) {
  const TaskHeaders h = headers_of("#JOBMAN --name=my task -n 4\n");
  EXPECT_EQ(h.name, "my");
  EXPECT_EQ(warnings_text(h.warnings), "task.sh:1:19: #JOBMAN: 'task' is not an option (--key=value), ignored\n"
                                       "task.sh:1:24: #JOBMAN: '-n' is not an option (--key=value), ignored\n"
                                       "task.sh:1:27: #JOBMAN: '4' is not an option (--key=value), ignored\n");
}

TEST(TaskHeaders, AcceleratorTakesTheCatalogsName) {
  EXPECT_EQ(headers_of("#JOBMAN --accelerator=v5e-16\n").accelerator, "v5litepod-16");
  EXPECT_EQ(headers_of("#JOBMAN --accelerator=v6e-1\n").accelerator, "v6e-1");
}

TEST(TaskHeaders, AcceleratorOffTheCatalogIsAWarning) {
  const TaskHeaders h = headers_of("#JOBMAN --accelerator=v4-384\n");
  EXPECT_EQ(h.accelerator, "v4-384");
  ASSERT_EQ(h.warnings.size(), 1u);
  EXPECT_NE(h.warnings[0].message.find("not among the v4 sizes jobman knows"), std::string::npos)
      << h.warnings[0].message;
  EXPECT_EQ(h.warnings[0].where.key_path, "#JOBMAN --accelerator");
}

TEST(TaskHeaders, PricingSpellings) {
  const std::map<std::string, Pricing> spellings{
      {"spot", Pricing::spot},          {"preemptible", Pricing::preemptible}, {"standard", Pricing::ondemand},
      {"ondemand", Pricing::ondemand},  {"on-demand", Pricing::ondemand},      {"SPOT", Pricing::spot},
      {"on_demand", Pricing::ondemand}, {"On-Demand", Pricing::ondemand}};
  for (const auto& [written, read] : spellings) {
    EXPECT_EQ(headers_of("#JOBMAN --pricing=" + written + "\n").pricing, read) << written;
  }
}

TEST(TaskHeaders, MailTypesAreNormalized) {
  const std::map<std::string, std::vector<std::string>> lists{
      {"END", {"END"}},
      {"fail,begin", {"BEGIN", "FAIL"}},
      {"End,END,end", {"END"}},
      {"ALL", {"BEGIN", "END", "FAIL"}},
      {"all,FAIL", {"BEGIN", "END", "FAIL"}},
      {"FAIL,END,BEGIN", {"BEGIN", "END", "FAIL"}},
      {"NONE", {}},
      {"none", {}},
  };
  for (const auto& [written, types] : lists) {
    const TaskHeaders h = headers_of("#JOBMAN --mail-user=a@b.co --mail-type=" + written + "\n");
    EXPECT_EQ(h.mail_types, types) << written;
    EXPECT_TRUE(h.mail_type_given) << written;
  }
}

TEST(TaskHeaders, MailTypeNoneNeedsNoUser) {
  const TaskHeaders h = headers_of("#JOBMAN --mail-type=NONE\n");
  EXPECT_TRUE(h.mail_type_given);
  EXPECT_TRUE(h.mail_types.empty());
  EXPECT_FALSE(h.mail_user);
}

TEST(TaskHeaders, HostsAreAllOrZero) {
  EXPECT_EQ(headers_of("#JOBMAN --hosts=all\n").hosts, "all");
  EXPECT_EQ(headers_of("#JOBMAN --hosts=ALL\n").hosts, "all");
  EXPECT_EQ(headers_of("#JOBMAN --hosts=0\n").hosts, "0");
}

TEST(TaskHeaders, EveryProblemIsReportedAtOnceInLineOrder) {
  const ConfigError e = header_error("#!/bin/bash\n"
                                     "#JOBMAN --zone=uscentral\n"
                                     "#JOBMAN --priority=1.5 --max-retries=-3\n"
                                     "#JOBMAN --accelerator=v7-8\n"
                                     "#JOBMAN --mail-user=x@y\n"
                                     "#JOBMAN --hosts=some\n");
  ASSERT_EQ(e.diagnostics().size(), 6u) << e.what();
  const std::vector<std::pair<int, int>> places{{2, 16}, {3, 20}, {3, 38}, {4, 23}, {5, 21}, {6, 17}};
  for (std::size_t i = 0; i < places.size(); ++i) {
    EXPECT_EQ(e.diagnostics()[i].where.line, places[i].first) << e.what();
    EXPECT_EQ(e.diagnostics()[i].where.column, places[i].second) << e.what();
  }
  EXPECT_EQ(e.diagnostics()[1].where.key_path, "#JOBMAN --priority");
  EXPECT_EQ(e.diagnostics()[2].where.key_path, "#JOBMAN --max-retries");
  // The e-mail address is not one, so its missing mail type is not reported on top.
  EXPECT_EQ(e.diagnostics()[4].message, "'x@y' is not an e-mail address");
}

// ---- Fan-out: a gcloud ssh to every worker ----

int fanout(const std::string& text) {
  return headers_of(text).fanout_line;
}

TEST(TaskFanout, NoCallIsZero) {
  EXPECT_EQ(fanout("#!/bin/bash\npython3 train.py\n"), 0);
  EXPECT_EQ(fanout(""), 0);
}

TEST(TaskFanout, OneLineCallIsFound) {
  EXPECT_EQ(fanout("#!/bin/bash\nset -e\ngcloud compute tpus tpu-vm ssh my-tpu --zone=z --worker=all "
                   "--command='python3 train.py'\n"),
            3);
  EXPECT_EQ(fanout("gcloud alpha compute tpus tpu-vm ssh t --worker all --command=x\n"), 1);
  EXPECT_EQ(fanout("/usr/bin/gcloud compute tpus tpu-vm ssh t --worker=\"all\" --command=x\n"), 1);
  EXPECT_EQ(fanout("cd /tmp && gcloud compute tpus tpu-vm ssh t --worker=all --command=x; echo done\n"), 1);
  EXPECT_EQ(fanout("out=$(gcloud compute tpus tpu-vm ssh t --worker=all --command=hostname)\n"), 1);
  // A '#' inside a word starts no comment.
  EXPECT_EQ(fanout("echo a#b && gcloud compute tpus tpu-vm ssh t --worker=all\n"), 1);
}

TEST(TaskFanout, ContinuedLinesAreOneCall) {
  EXPECT_EQ(fanout(read_bytes(tasks_dir() / "lite-fanout.sh")), 10);
  EXPECT_EQ(fanout("echo start\n"
                   "gcloud compute tpus tpu-vm ssh t \\\n"
                   "  --zone=us-central2-b \\\n"
                   "  --worker all \\\n"
                   "  --command=x\n"),
            2);
}

TEST(TaskFanout, QuotedTextSpanningLinesIsPartOfTheCall) {
  EXPECT_EQ(fanout("gcloud compute tpus tpu-vm ssh t --command=\"\n"
                   "  cd ~/work  # a comment inside the remote command\n"
                   "  python3 train.py\n"
                   "\" --worker=all\n"),
            1);
}

TEST(TaskFanout, CommentsDoNotCount) {
  EXPECT_EQ(fanout(read_bytes(tasks_dir() / "fanout-in-comment.sh")), 0);
  EXPECT_EQ(fanout("  # gcloud compute tpus tpu-vm ssh t --worker=all\n"), 0);
  EXPECT_EQ(fanout("#JOBMAN --name=x # gcloud compute tpus tpu-vm ssh t --worker=all\n"), 0);
}

TEST(TaskFanout, OtherCallsDoNotCount) {
  EXPECT_EQ(fanout("gcloud compute tpus tpu-vm ssh t --worker=0 --command=x\n"), 0);
  EXPECT_EQ(fanout("gcloud compute tpus tpu-vm scp f t: --worker=all\n"), 0);
  EXPECT_EQ(fanout("gcloud compute ssh vm --command=x\n"), 0);
  EXPECT_EQ(fanout("echo gcloud compute tpus tpu-vm ssh t; echo --worker=all\n"), 0);
  EXPECT_EQ(fanout("echo 'gcloud compute tpus tpu-vm ssh t --worker=all'\n"), 0);
  EXPECT_EQ(fanout("echo x#gcloud compute tpus tpu-vm ssh t --worker=all\n"), 0); // x#gcloud is not gcloud.
}

TEST(TaskFanout, HereDocumentBodiesAreReadLineByLine) {
  // An apostrophe in a here-document opens no quote.
  EXPECT_EQ(fanout("cat > notes.txt <<EOF\n"
                   "it's here\n"
                   "EOF\n"
                   "gcloud compute tpus tpu-vm ssh t --worker=all --command=x\n"),
            4);
  EXPECT_EQ(fanout("bash <<'EOF'\n"
                   "# gcloud compute tpus tpu-vm ssh t --worker=all\n"
                   "gcloud compute tpus tpu-vm ssh t --worker=all --command=x\n"
                   "EOF\n"),
            3);
  EXPECT_EQ(fanout("\tcat <<-END\n\tdon't\n\tEND\ngcloud compute tpus tpu-vm ssh t --worker=all\n"), 4);
}

// ---- Reading a script: defaults, overrides, fan-out ----

// A script file in `dir`.
fs::path script(const TempDir& dir, const std::string& name, const std::string& text) {
  return dir.write(name, text);
}

TEST(TaskRequest, DefaultsApply) {
  const TempDir dir;
  const std::string text = "#!/bin/sh\n#JOBMAN --accelerator=v4-8\necho training\n";
  const auto path = script(dir, "train-small.sh", text);
  const TaskRequest r = read_task_script(path.string());
  EXPECT_EQ(r.name, "train-small");
  EXPECT_EQ(r.accelerator, "v4-8");
  EXPECT_EQ(r.zone, "");
  EXPECT_EQ(r.pricing, std::nullopt);
  EXPECT_EQ(r.tpu_version, "");
  EXPECT_EQ(r.max_retries, 3);
  EXPECT_EQ(r.priority, 0);
  EXPECT_TRUE(r.all_hosts);
  EXPECT_EQ(r.mail_user, "");
  EXPECT_TRUE(r.mail_types.empty());
  EXPECT_EQ(r.script_text, text);
  EXPECT_EQ(r.script_path, path.string());
  EXPECT_TRUE(fs::path(r.script_path).is_absolute());
  EXPECT_TRUE(r.warnings.empty()) << warnings_text(r.warnings);
  EXPECT_EQ(r.origins.at("accelerator").line, 2);
}

TEST(TaskRequest, ScriptPathIsMadeAbsolute) {
  const TempDir dir;
  script(dir, "a.sh", "#JOBMAN --accelerator=v4-8\n");
  const auto previous = fs::current_path();
  fs::current_path(dir.path());
  TaskRequest r;
  try {
    r = read_task_script("./a.sh");
  } catch (...) {
    fs::current_path(previous);
    throw;
  }
  fs::current_path(previous);
  EXPECT_EQ(r.script_path, (dir.path() / "a.sh").string());
}

TEST(TaskRequest, HeadersAreTaken) {
  const TaskRequest r = read_task_script((tasks_dir() / "full.sh").string());
  EXPECT_EQ(r.name, "my-task");
  EXPECT_EQ(r.accelerator, "v4-8");
  EXPECT_EQ(r.zone, "us-central2-b");
  EXPECT_EQ(r.pricing, Pricing::ondemand);
  EXPECT_EQ(r.tpu_version, "tpu-ubuntu2204-base");
  EXPECT_EQ(r.max_retries, 5);
  EXPECT_EQ(r.priority, -2);
  EXPECT_FALSE(r.all_hosts);
  EXPECT_EQ(r.mail_user, "you@example.com");
  EXPECT_EQ(r.mail_types, (std::vector<std::string>{"BEGIN", "END", "FAIL"}));
}

TEST(TaskRequest, FlagsWinOverHeaders) {
  TaskOverrides o;
  o.name = "flag-name";
  o.accelerator = "v5e-8";
  o.zone = "us-west4-a";
  o.tpu_version = "v2-alpha-tpuv5-lite";
  o.pricing = "spot";
  o.max_retries = 0;
  o.priority = 9;
  const TaskRequest r = read_task_script((tasks_dir() / "full.sh").string(), o);
  EXPECT_EQ(r.name, "flag-name");
  EXPECT_EQ(r.accelerator, "v5litepod-8");
  EXPECT_EQ(r.zone, "us-west4-a");
  EXPECT_EQ(r.tpu_version, "v2-alpha-tpuv5-lite");
  EXPECT_EQ(r.pricing, Pricing::spot);
  EXPECT_EQ(r.max_retries, 0);
  EXPECT_EQ(r.priority, 9);
  const SourceLocation& at = r.origins.at("accelerator");
  EXPECT_EQ(at.file, "--accelerator");
  EXPECT_EQ(at.line, 0);
  EXPECT_EQ(r.origins.at("zone").file, "--zone");
  // What no flag gave still comes from the headers.
  EXPECT_EQ(r.origins.at("mail-user").line, 8);
  EXPECT_EQ(r.mail_user, "you@example.com");
}

TEST(TaskRequest, FlagsAreCheckedLikeHeadersAllAtOnce) {
  TaskOverrides o;
  o.name = "";
  o.accelerator = "v4-7";
  o.zone = "europe-west4";
  o.pricing = "cheap";
  o.max_retries = -1;
  const TempDir dir;
  const auto path = script(dir, "t.sh", "#JOBMAN --accelerator=v4-8\n#JOBMAN --priority=x\n");
  try {
    read_task_script(path.string(), o);
    FAIL() << "read";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.diagnostics().size(), 6u) << what;
    // The script's problem first (it has a line), then the flags'.
    EXPECT_EQ(e.diagnostics()[0].where.file, path.string()) << what;
    for (const std::string& expected :
         {std::string("--name: needs a value (e.g. --name=my-task)"),
          std::string("--accelerator: 'v4-7' is not a valid v4 size"),
          std::string("--zone: 'europe-west4' is not a zone ('europe-west4' is a region; add the zone letter, e.g. "
                      "europe-west4-b)"),
          std::string("--pricing: unknown pricing 'cheap'"), std::string("--max-retries: must be at least 0, got -1"),
          path.string() + ":2:20: #JOBMAN --priority: expected an integer, got 'x'"}) {
      EXPECT_NE(what.find(expected), std::string::npos) << "expected: " << expected << "\nactual:\n" << what;
    }
  }
}

TEST(TaskRequest, FlagAcceleratorIsEnoughWithoutAHeader) {
  const TempDir dir;
  const auto path = script(dir, "plain.sh", "python3 train.py\n");
  TaskOverrides o;
  o.accelerator = "v4-8";
  EXPECT_EQ(read_task_script(path.string(), o).accelerator, "v4-8");
}

TEST(TaskRequest, NoAcceleratorIsAUsageErrorNamingTheFile) {
  const TempDir dir;
  const auto path = script(dir, "plain.sh", "#!/bin/sh\n#JOBMAN --zone=us-central2-b\npython3 train.py\n");
  try {
    read_task_script(path.string());
    FAIL() << "read";
  } catch (const ConfigError& e) {
    FAIL() << "a ConfigError: " << e.what();
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              path.string() + ": no accelerator: give --accelerator or a '#JOBMAN --accelerator=...' line");
    EXPECT_EQ(e.code(), ExitCode::usage);
  }
}

TEST(TaskRequest, UnreadableFileIsAnErrorNamingThePath) {
  const TempDir dir;
  const std::string path = (dir / "missing.sh").string();
  try {
    read_task_script(path);
    FAIL() << "read";
  } catch (const ConfigError& e) {
    FAIL() << "a ConfigError: " << e.what();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ExitCode::error);
  }
}

TEST(TaskRequest, EmptyFileIsAConfigError) {
  const TempDir dir;
  const auto path = script(dir, "empty.sh", "");
  try {
    read_task_script(path.string());
    FAIL() << "read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ": the task script is empty"), std::string::npos) << e.what();
  }
}

TEST(TaskRequest, BinaryFileIsAConfigErrorAtItsNulByte) {
  const TempDir dir;
  static const char bytes[] = "#JOBMAN --accelerator=v4-8\nab\0cd\n";
  const auto path = script(dir, "binary.sh", std::string(bytes, sizeof bytes - 1));
  try {
    read_task_script(path.string());
    FAIL() << "read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ":2:3: not a text file: it holds a NUL byte"),
              std::string::npos)
        << e.what();
  }
}

TEST(TaskRequest, ScriptThatFansOutRunsOnHostZeroWithANote) {
  const std::string path = (tasks_dir() / "lite-fanout.sh").string();
  const TaskRequest r = read_task_script(path);
  EXPECT_FALSE(r.all_hosts);
  EXPECT_EQ(r.name, "llama-pretrain");
  EXPECT_EQ(r.max_retries, 2);
  EXPECT_EQ(warnings_text(r.warnings),
            path + ":10:0: #JOBMAN --hosts: runs on host 0 only, as jobman-lite ran it: line 10 fans out to every "
                   "host itself; '#JOBMAN --hosts=all' runs it on every host\n");
}

TEST(TaskRequest, FanoutInACommentKeepsEveryHost) {
  const TaskRequest r = read_task_script((tasks_dir() / "fanout-in-comment.sh").string());
  EXPECT_TRUE(r.all_hosts);
  EXPECT_TRUE(r.warnings.empty()) << warnings_text(r.warnings);
}

TEST(TaskRequest, HostsHeaderWinsOverFanout) {
  const TaskRequest all = read_task_script((tasks_dir() / "fanout-hosts-all.sh").string());
  EXPECT_TRUE(all.all_hosts);
  EXPECT_TRUE(all.warnings.empty()) << warnings_text(all.warnings);
  const TempDir dir;
  const auto path = script(dir, "zero.sh", "#JOBMAN --accelerator=v4-32 --hosts=0\npython3 train.py\n");
  EXPECT_FALSE(read_task_script(path.string()).all_hosts);
}

// ---- The config document ----

// The config the loader makes of a task's document, with a default zone as the caller passes it.
JobConfig load(const TaskRequest& r, bool recorded = false, const std::string& yaml = "") {
  LoadOptions options;
  options.default_zone = "us-central2-b";
  options.recorded = recorded;
  std::vector<JobConfig> configs;
  try {
    configs = parse_job_configs(yaml.empty() ? r.config_yaml : yaml, "task.yaml", options);
  } catch (const ConfigError& e) {
    ADD_FAILURE() << "the loader refused:\n" << e.what() << "\n" << (yaml.empty() ? r.config_yaml : yaml);
    return {};
  }
  EXPECT_EQ(configs.size(), 1u);
  return configs.empty() ? JobConfig{} : configs[0];
}

// What running a task's command on a host left behind.
struct HostRun {
  test::RunResult result;
  std::string written; // The script file it wrote.
  fs::perms mode = fs::perms::none;
  std::string ran; // $HOME/ran, which the test scripts write.
};

// Runs `cmd` with /bin/sh as the workload would, in a fresh HOME, as attempt `attempt` of job 000042.
HostRun run_on_host(const TempDir& dir, const std::string& cmd, int attempt = 1) {
  const fs::path home = dir / "home";
  fs::create_directories(home);
  HostRun out;
  test::RunOptions options;
  options.env = {{"HOME", home.string()}, {"JOBMAN_JOB_ID", "000042"}, {"JOBMAN_ATTEMPT", std::to_string(attempt)}};
  options.cwd = home.string();
  out.result = test::run_program({"/bin/sh", "-c", cmd}, options);
  const fs::path file = home / ".jobman/jobs/000042" / ("task-" + std::to_string(attempt) + ".sh");
  out.written = read_bytes(file);
  std::error_code ec;
  out.mode = fs::status(file, ec).permissions();
  out.ran = read_bytes(home / "ran");
  return out;
}

TEST(TaskConfig, LoaderReadsWhatTheTaskAsksFor) {
  const TaskRequest r = read_task_script((tasks_dir() / "full.sh").string());
  const JobConfig c = load(r);
  EXPECT_EQ(c.job.name, "my-task");
  EXPECT_EQ(c.tpu.accelerator.name, "v4-8");
  EXPECT_EQ(c.tpu.zone, "us-central2-b");
  EXPECT_EQ(c.tpu.version, "tpu-ubuntu2204-base");
  EXPECT_EQ(c.tpu.pricing, Pricing::ondemand);
  EXPECT_FALSE(c.command.workers.all);
  EXPECT_EQ(c.command.workers.indices, (std::vector<int>{0}));
  EXPECT_EQ(c.recovery.max_failures, 5);
  // --mail-user and --mail-type are the notify section's Brevo recipients and events.
  ASSERT_TRUE(c.notify.has_value());
  EXPECT_EQ(c.notify->mail_to, std::vector<std::string>{"you@example.com"});
  EXPECT_EQ(c.notify->events, (std::vector<NotifyEvent>{NotifyEvent::begin, NotifyEvent::end, NotifyEvent::fail}));
  // Only keys the loader knows, and nothing it has to say about them.
  EXPECT_TRUE(c.warnings.empty()) << warnings_text(c.warnings) << r.config_yaml;
}

TEST(TaskConfig, WhatWasNotGivenIsLeftOut) {
  const TempDir dir;
  const auto path = script(dir, "small.sh", "#!/bin/sh\n#JOBMAN --accelerator=v4-8\necho hi\n");
  const TaskRequest r = read_task_script(path.string());
  for (const std::string key : {"zone:", "version:", "pricing:", "brevo_email:", "priority", "mail"}) {
    EXPECT_EQ(r.config_yaml.find(key), std::string::npos) << key << " in\n" << r.config_yaml;
  }
  const JobConfig c = load(r);
  EXPECT_EQ(c.job.name, "small");
  EXPECT_EQ(c.tpu.zone, "us-central2-b"); // LoadOptions::default_zone.
  EXPECT_EQ(c.tpu.pricing, Pricing::spot);
  EXPECT_TRUE(c.command.workers.all);
  EXPECT_EQ(c.recovery.max_failures, 3);
  EXPECT_FALSE(c.email.has_value());
}

TEST(TaskConfig, FlagsReachTheDocument) {
  TaskOverrides o;
  o.accelerator = "v6e-8";
  o.zone = "us-east5-b";
  o.pricing = "preemptible";
  o.max_retries = 1;
  o.name = "from-flag";
  const JobConfig c = load(read_task_script((tasks_dir() / "minimal.sh").string(), o));
  EXPECT_EQ(c.job.name, "from-flag");
  EXPECT_EQ(c.tpu.accelerator.name, "v6e-8");
  EXPECT_EQ(c.tpu.zone, "us-east5-b");
  EXPECT_EQ(c.tpu.pricing, Pricing::preemptible);
  EXPECT_EQ(c.recovery.max_failures, 1);
}

TEST(TaskConfig, CommandWritesTheScriptAndRunsItThroughItsShebang) {
  const TempDir dir;
  const std::string text = "#!/bin/sh\n"
                           "#JOBMAN --accelerator=v4-8\n"
                           "echo \"ran $JOBMAN_JOB_ID $JOBMAN_ATTEMPT $0\" > \"$HOME/ran\"\n";
  const auto path = script(dir, "task.sh", text);
  const JobConfig c = load(read_task_script(path.string()));
  const HostRun run = run_on_host(dir, c.command.cmd, 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.err;
  EXPECT_EQ(run.written, text);
  EXPECT_EQ(run.mode, fs::perms::owner_all);
  EXPECT_EQ(run.ran, "ran 000042 2 " + (dir / "home/.jobman/jobs/000042/task-2.sh").string() + "\n");
}

TEST(TaskConfig, ScriptWithoutShebangRunsWithBash) {
  const TempDir dir;
  // Arrays and [[ ]] are bash's, not sh's.
  const std::string text = "#JOBMAN --accelerator=v4-8\n"
                           "words=(a b c)\n"
                           "[[ ${#words[@]} == 3 ]] && echo \"bash ${words[1]}\" > \"$HOME/ran\"\n"
                           "exit 7\n";
  const auto path = script(dir, "task.sh", text);
  const JobConfig c = load(read_task_script(path.string()));
  const HostRun run = run_on_host(dir, c.command.cmd);
  EXPECT_EQ(run.result.exit_code, 7) << run.result.err;
  EXPECT_EQ(run.written, text);
  EXPECT_EQ(run.ran, "bash b\n");
}

TEST(TaskConfig, ScriptIsReadableInTheDocument) {
  const TempDir dir;
  const std::string text = "#!/bin/bash\n#JOBMAN --accelerator=v4-8\npython3 train.py --steps 100\n";
  const TaskRequest r = read_task_script(script(dir, "task.sh", text).string());
  const JobConfig c = load(r);
  EXPECT_NE(c.command.cmd.find(text), std::string::npos) << c.command.cmd;
  EXPECT_NE(r.config_yaml.find("    python3 train.py --steps 100\n"), std::string::npos) << r.config_yaml;
}

// Scripts whose bytes are hard to carry: references the loader resolves, escapes it removes, no final newline,
// carriage returns, blank and indented lines, bytes that are not UTF-8, text like the here-document's delimiter.
// Each runs (its first lines write $HOME/ran and exit) and must be written exactly.
struct HardScript {
  std::string name;
  std::string tail; // After the lines that run.
  bool encoded;     // Carried as base64 rather than as text.
};

class TaskScriptBytes : public ::testing::TestWithParam<HardScript> {};

TEST_P(TaskScriptBytes, SurviveTheConfigAndItsSnapshot) {
  const TempDir dir;
  const std::string text = "#!/bin/sh\n#JOBMAN --accelerator=v4-8\necho ok > \"$HOME/ran\"\nexit 0\n" + GetParam().tail;
  const TaskRequest r = read_task_script(script(dir, "task.sh", text).string());
  ASSERT_EQ(r.script_text, text);
  const JobConfig c = load(r);
  EXPECT_EQ(c.command.cmd.find("base64 -d") != std::string::npos, GetParam().encoded) << c.command.cmd;
  const HostRun run = run_on_host(dir, c.command.cmd);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.err;
  EXPECT_EQ(run.written, text);
  EXPECT_EQ(run.ran, "ok\n");
  // The snapshot the store keeps, read back as the supervisor reads it, holds the same command.
  const JobConfig recorded = load(r, true, c.resolved_yaml);
  EXPECT_EQ(recorded.command.cmd, c.command.cmd) << c.resolved_yaml;
}

std::string hard_name(const ::testing::TestParamInfo<HardScript>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    TaskHardScripts, TaskScriptBytes,
    ::testing::Values(HardScript{"Plain", "echo done\n", false},
                      HardScript{"References", "echo ${tpu.zone} ${job.name} ${oc.env:HOME} ${oc.env:X,d}\n", false},
                      HardScript{"EscapedReferences", "echo $${tpu.zone} $$${job.name} $$$$\n", false},
                      HardScript{"ShellBraces", "echo ${HOME} ${#x} ${x:-y} ${a.b ${c.d}}\n", false},
                      HardScript{"BackslashBeforeBrace", "echo \"\\${HOME}\" \\\\${x}\n", true},
                      HardScript{"BackslashBeforeReference", "echo \\${tpu.zone}\n", false},
                      HardScript{"NoFinalNewline", "echo last", false},
                      HardScript{"TrailingBlankLines", "echo last\n\n\n", false},
                      HardScript{"CarriageReturns", "echo a\r\necho b\r\n", false},
                      HardScript{"IndentedAndBlank", "  indented\n\n\tTabbed\n   \n", false},
                      HardScript{"Unicode", "echo 'h\xc3\xa9llo \xe2\x9c\x93'\n", false},
                      HardScript{"NotUtf8", "echo '\xff\xfe caf\xe9'\n", true},
                      HardScript{"DelimiterLike", "JOBMAN_SCRIPT_0123456789abcdef\nEOF\n'EOF'\n", false},
                      HardScript{"YamlLike", "key: value\n- item\n--- \n... \n|\n\"quoted\"\n", false},
                      HardScript{"ControlCharacters", "echo '\x1b[31mred\x1b[0m\x7f'\n", false}),
    hard_name);

TEST(TaskConfig, DelimiterIsNotInTheScript) {
  const TempDir dir;
  const std::string text = "#JOBMAN --accelerator=v4-8\ncat <<'EOF'\nJOBMAN_SCRIPT_\nEOF\n";
  const JobConfig c = load(read_task_script(script(dir, "task.sh", text).string()));
  const auto open = c.command.cmd.find("<<'");
  ASSERT_NE(open, std::string::npos) << c.command.cmd;
  const auto close = c.command.cmd.find('\'', open + 3);
  const std::string delimiter = c.command.cmd.substr(open + 3, close - open - 3);
  EXPECT_TRUE(delimiter.starts_with("JOBMAN_SCRIPT_")) << delimiter;
  EXPECT_EQ(delimiter.size(), std::string("JOBMAN_SCRIPT_").size() + 16) << delimiter;
  EXPECT_EQ(text.find(delimiter), std::string::npos);
  // The same script always gets the same command.
  const JobConfig again = load(read_task_script(script(dir, "task.sh", text).string()));
  EXPECT_EQ(again.command.cmd, c.command.cmd);
}

TEST(TaskConfig, NamesAndAddressesAreWrittenAsGiven) {
  const TempDir dir;
  const std::string text = "#JOBMAN --accelerator=v4-8 --name=${job.name}:#1 --mail-user=a+${x.y}@b.example\n"
                           "#JOBMAN --mail-type=END --tpu-version=\"odd\n";
  const TaskRequest r = read_task_script(script(dir, "task.sh", text).string());
  const JobConfig c = load(r);
  EXPECT_EQ(c.job.name, "${job.name}:#1");
  ASSERT_TRUE(c.notify.has_value());
  EXPECT_EQ(c.notify->mail_to, std::vector<std::string>{"a+${x.y}@b.example"});
  EXPECT_EQ(c.notify->events, std::vector<NotifyEvent>{NotifyEvent::end});
  EXPECT_EQ(c.tpu.version, "\"odd");
}

// ---- Which files are task scripts ----

TEST(TaskScriptFiles, ScriptNamesAreScripts) {
  const TempDir dir;
  EXPECT_TRUE(is_task_script((dir / "missing.sh").string()));
  EXPECT_TRUE(is_task_script((dir / "missing.bash").string()));
  EXPECT_TRUE(is_task_script(script(dir, "UPPER.SH", "key: value\n").string()));
}

TEST(TaskScriptFiles, YamlNamesAreConfigs) {
  const TempDir dir;
  EXPECT_FALSE(is_task_script(script(dir, "job.yaml", "#!/bin/sh\n#JOBMAN --accelerator=v4-8\n").string()));
  EXPECT_FALSE(is_task_script(script(dir, "job.yml", "#!/bin/sh\n").string()));
  EXPECT_FALSE(is_task_script((dir / "missing.yaml").string()));
}

TEST(TaskScriptFiles, OtherNamesAreReadByTheirContent) {
  const TempDir dir;
  EXPECT_TRUE(is_task_script(script(dir, "train", "#!/usr/bin/env python3\nprint(1)\n").string()));
  EXPECT_TRUE(is_task_script(script(dir, "job.txt", "echo a\n  #JOBMAN --accelerator=v4-8\n").string()));
  EXPECT_FALSE(is_task_script(script(dir, "config", "job:\n  name: x\n# JOBMAN notes\n").string()));
  EXPECT_FALSE(is_task_script(script(dir, "empty", "").string()));
  EXPECT_FALSE(is_task_script((dir / "missing").string()));
  EXPECT_FALSE(is_task_script(dir.path().string()));
}

} // namespace config_task_script_test
} // namespace jobman::config
