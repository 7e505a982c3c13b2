// The workload: a two-layer tanh perceptron learning a fixed random teacher network by SGD with momentum, every
// matrix product of its forward and backward passes computed on the simulated systolic array.
#pragma once

#include "systolic/exact_sum.hpp"
#include "systolic/matrix.hpp"
#include "systolic/systolic_array.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// What a run needs to continue exactly where it was: the number of completed steps, the weights, the momentum and
// the data that rollbacks skipped.
struct TrainingState {
  std::uint64_t step = 0;       // Completed steps; the next step is step + 1.
  MlpWeights weights;           // The student's parameters.
  MlpWeights velocity;          // The momentum buffers, one per parameter tensor.
  std::uint64_t data_shift = 0; // Steps of data that rollbacks skipped: step s trains on the batch of s + data_shift.
  std::uint64_t rollback_step = 0; // K of the newest rollback (resume before step K) data_shift includes; 0: none.
};

// Examples [begin, end) of a step's batch: one slice's share.
struct ExampleRange {
  std::uint32_t begin = 0; // The first example.
  std::uint32_t end = 0;   // One past the last.

  // The number of examples.
  [[nodiscard]] std::uint32_t size() const { return end - begin; }
};

// Slice `slice`'s share when `slices` slices split a batch of `batch` examples: [floor(slice * batch / slices),
// floor((slice + 1) * batch / slices)), contiguous, in slice order, sizes differing by one at most (a slice has none
// when batch < slices).
ExampleRange batch_share(std::uint32_t batch, std::uint32_t slice, std::uint32_t slices);

// The exact sums of a step's per-example contributions: the loss's squared errors and every gradient element. Since
// the sums are exact, any partition of the batch into shares adds up to the same bits as the whole batch.
struct GradientSums {
  SquareSum squared_error;  // (y - target)^2 over every output of every example.
  std::vector<FloatSum> w1; // dL/dW1, dim x dim, row-major.
  std::vector<FloatSum> b1; // dL/db1, dim.
  std::vector<FloatSum> w2; // dL/dW2, dim x dim, row-major.
  std::vector<FloatSum> b2; // dL/db2, dim.

  // Empty sums for a model of width `dim`.
  static GradientSums zeros(std::uint32_t dim);
  // Adds another share's sums, of the same width (throws std::invalid_argument otherwise).
  GradientSums& operator+=(const GradientSums& other);
  // True when every sum holds the same bits.
  bool operator==(const GradientSums& other) const = default;
  // The sums as bytes: each sum's encoding (ExactSum::encode), the squared error first, then W1, b1, W2, b2.
  [[nodiscard]] std::string encode() const;
  // Sums of width `dim` read from `bytes`; nothing unless they are exactly such an encoding.
  static std::optional<GradientSums> decode(std::string_view bytes, std::uint32_t dim);
};

// What the forward and backward passes of one share of a step produced.
struct PartialStep {
  GradientSums sums; // The share's exact sums.
  ProductStats mxu;  // The cost of the share's products on this array.
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
  // Rows `examples` of batch(step), drawn without drawing the others.
  [[nodiscard]] Batch batch(std::uint64_t step, ExampleRange examples) const;
  // The forward and backward passes of step state.step + 1 (on the batch of step state.step + 1 + state.data_shift)
  // over `examples` on `mxu`: every example's squared errors and gradient contributions (its rank-one weight gradients
  // are products of their own on the array) added to exact sums. When a loss term is not finite the backward pass is
  // skipped: the sums carry the NaN or infinity. A `gradient_scale` other than 1 multiplies the loss's gradient
  // before the backward pass: a corrupted update, as in a loss spike (the squared errors are left as they are).
  PartialStep partial_step(const TrainingState& state, SystolicArray& mxu, ExampleRange examples,
                           float gradient_scale = 1.0F) const;
  // Completes step state.step + 1 from the sums of the whole batch: the loss, the gradients each rounded once from
  // its exact sum, and the momentum update; advances state.step. When the loss or a gradient is NaN or infinite
  // the state is left untouched and the report says so. `mxu` is reported as the step's cost.
  StepReport apply_step(TrainingState& state, const GradientSums& sums, const ProductStats& mxu) const;
  // partial_step over the whole batch (with `gradient_scale`), then apply_step.
  StepReport train_step(TrainingState& state, SystolicArray& mxu, float gradient_scale = 1.0F) const;

private:
  ModelConfig config_; // The run's identity.
  MlpWeights teacher_; // The target network.
};

// "--dim 10 there, 12 here, ..." for the fields in which `there` differs from `here` (with other words for "there"
// and "here" when given); empty when none does.
std::string describe_config_differences(const ModelConfig& there, const ModelConfig& here,
                                        const std::string& there_name = "there", const std::string& here_name = "here");

// FNV-1a 64 over the weights' exact bytes (W1, b1, W2, b2, each element as little-endian IEEE-754 binary32).
std::uint64_t weights_checksum(const MlpWeights& weights);

} // namespace jobman::systolic
