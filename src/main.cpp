#include "jobman/cli/app.hpp"

int main(int argc, char** argv) {
  return jobman::cli::run(argc, argv);
}
