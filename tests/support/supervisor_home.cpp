#include "support/supervisor_home.hpp"

namespace jobman::test {

std::string uninterrupted_checksum(int steps) {
  const auto tool = (std::filesystem::path(mock_cloud_binary()).parent_path() / "tools" / "systolic-train").string();
  const auto run = run_program({tool, "--steps", std::to_string(steps)});
  const auto at = run.out.rfind("checksum=");
  return at == std::string::npos ? std::string("none") : run.out.substr(at + 9, 16);
}

} // namespace jobman::test
