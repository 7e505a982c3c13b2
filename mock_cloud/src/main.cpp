// jobman-mock-cloud: the TPU v2 API emulator.
#include "mock_cloud/server.hpp"

int main(int argc, char** argv) {
  return jobman::mock::run_mock_cloud(argc, argv);
}
