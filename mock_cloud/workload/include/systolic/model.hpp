// The workload: a two-layer tanh perceptron learning a fixed random teacher network by SGD with momentum, every
// matrix product of its forward and backward passes computed on the simulated systolic array.
#pragma once

#include "systolic/matrix.hpp"
#include "systolic/systolic_array.hpp"

#include <cstdint>

namespace jobman::systolic {

// Everything that decides the trajectory of the weights (the array size does not: its products are exact).
struct ModelConfig {
  std::uint32_t dim = 32;     // Width of the input, the hidden layer and the output.
  std::uint32_t batch = 16;   // Examples per step.
  std::uint64_t seed = 1;     // Seeds the teacher, the initial weights and every batch.
  double learning_rate = 0.1; // SGD step size.
  double momentum = 0.9;      // Heavy-ball momentum coefficient (0 is plain SGD).

  // True when every field is equal (learning rate and momentum by value).
  bool operator==(const ModelConfig& other) const = default;
};

// The parameters of y = tanh(x W1 + b1) W2 + b2 (or a tensor of the same shapes, such as the momentum buffers).
struct MlpWeights {
  Matrix w1; // dim x dim, first layer.
  Matrix b1; // 1 x dim, first bias.
  Matrix w2; // dim x dim, second layer.
  Matrix b2; // 1 x dim, second bias.

  // All-zero tensors for a model of width `dim`.
  static MlpWeights zeros(std::uint32_t dim);
  // True when no element is NaN or infinite.
  [[nodiscard]] bool all_finite() const;
  // True when every tensor has the same shape and bits as in `other`.
  [[nodiscard]] bool bitwise_equal(const MlpWeights& other) const;
};

// What a run needs to continue exactly where it was: the number of completed steps, the weights and the momentum.
struct TrainingState {
  std::uint64_t step = 0; // Completed steps; the next step is step + 1.
  MlpWeights weights;     // The student's parameters.
  MlpWeights velocity;    // The momentum buffers, one per parameter tensor.
};

// One step's examples.
struct Batch {
  Matrix inputs;  // batch x dim, uniform in [-1, 1).
  Matrix targets; // batch x dim, the teacher's outputs for `inputs`.
};

// What one step did.
struct StepReport {
  std::uint64_t step = 0; // The step's number (1 for the first).
  double loss = 0;        // Mean squared error of the student on the step's batch, before the update.
  ProductStats mxu;       // The cost of the step's five products on the array.
  bool applied = false;   // False when the loss was not finite and the weights were left as they were.
};

// The teacher-student regression task of one configuration.
class TeacherStudentTask {
public:
  // Draws the teacher's weights from the seed; throws std::invalid_argument for a zero dim or batch.
  explicit TeacherStudentTask(ModelConfig config);

  // The configuration.
  [[nodiscard]] const ModelConfig& config() const { return config_; }
  // The teacher network whose outputs are the targets.
  [[nodiscard]] const MlpWeights& teacher() const { return teacher_; }
  // The student before its first step: small random weights drawn from the seed, zero biases and momentum.
  [[nodiscard]] TrainingState initial_state() const;
  // The examples of step `step` (1-based); they depend on the seed, the shapes and `step` only, so a resumed run
  // sees exactly the batches the uninterrupted run saw.
  [[nodiscard]] Batch batch(std::uint64_t step) const;
  // Runs step state.step + 1: forward and backward passes on `mxu`, then the momentum update, and advances
  // state.step. When the loss is NaN or infinite the state is left untouched and the report says so.
  StepReport train_step(TrainingState& state, SystolicArray& mxu) const;

private:
  ModelConfig config_; // The run's identity.
  MlpWeights teacher_; // The target network.
};

// FNV-1a 64 over the weights' exact bytes (W1, b1, W2, b2, each element as little-endian IEEE-754 binary32).
std::uint64_t weights_checksum(const MlpWeights& weights);

} // namespace jobman::systolic
