// systolic-train: the training workload the mock cloud's TPU slices run.
#include "systolic/train.hpp"

int main(int argc, char** argv) {
  return jobman::systolic::systolic_train_main(argc, argv);
}
