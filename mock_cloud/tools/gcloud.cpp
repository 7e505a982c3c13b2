// gcloud, as the mock cloud's worker hosts and jobman (against the mock) run it: see mock_cloud/gcloud_shim.hpp.
#include "mock_cloud/gcloud_shim.hpp"

#include <string>
#include <vector>

int main(int argc, char** argv) {
  return jobman::mock::run_gcloud(std::vector<std::string>(argv + 1, argv + argc));
}
