#include "systolic/model.hpp"

#include "systolic/hashing.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace jobman::systolic {

namespace {

// The SplitMix64 finaliser: a bijection on 64 bits whose outputs look independent.
std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Which random numbers a draw belongs to; each stream is independent of the others.
enum class Stream : std::uint64_t {
  teacher_w1 = 1,
  teacher_b1 = 2,
  teacher_w2 = 3,
  teacher_b2 = 4,
  student_w1 = 5,
  student_w2 = 6,
  inputs = 7,
};

// A uniform float in [-1, 1) that is a pure function of (seed, stream, step, index): a counter-based generator,
// so any element of any step can be drawn without drawing the ones before it.
float uniform(std::uint64_t seed, Stream stream, std::uint64_t step, std::uint64_t index) {
  const std::uint64_t bits = mix64(mix64(mix64(mix64(seed) ^ static_cast<std::uint64_t>(stream)) ^ step) ^ index);
  // 24 random bits make every float in [0, 1) with spacing 2^-24 equally likely; both operations below are exact.
  const auto unit = static_cast<float>(bits >> 40) * 0x1p-24F;
  return 2.0F * unit - 1.0F;
}

// A rows x cols matrix of uniform draws scaled by `scale`.
Matrix random_matrix(std::size_t rows, std::size_t cols, float scale, std::uint64_t seed, Stream stream,
                     std::uint64_t step = 0) {
  Matrix m(rows, cols);
  for (std::size_t i = 0; i < m.values().size(); ++i) {
    m.values()[i] = scale * uniform(seed, stream, step, i);
  }
  return m;
}

// Adds the 1 x N row `bias` to every row of `m`.
void add_bias(Matrix& m, const Matrix& bias) {
  for (std::size_t r = 0; r < m.rows(); ++r) {
    for (std::size_t c = 0; c < m.cols(); ++c) {
      m.at(r, c) = m.at(r, c) + bias.at(0, c);
    }
  }
}

// The sum of the rows of `m`, as a 1 x N row, rows added in order.
Matrix column_sums(const Matrix& m) {
  Matrix sums(1, m.cols());
  for (std::size_t r = 0; r < m.rows(); ++r) {
    for (std::size_t c = 0; c < m.cols(); ++c) {
      sums.at(0, c) = sums.at(0, c) + m.at(r, c);
    }
  }
  return sums;
}

// The teacher's forward pass (data generation, not the student's work, so it uses the reference product).
Matrix teacher_forward(const MlpWeights& teacher, const Matrix& inputs) {
  Matrix hidden = reference_product(inputs, teacher.w1);
  add_bias(hidden, teacher.b1);
  for (float& v : hidden.values()) {
    v = std::tanh(v);
  }
  Matrix out = reference_product(hidden, teacher.w2);
  add_bias(out, teacher.b2);
  return out;
}

// Heavy-ball momentum: velocity = momentum * velocity + gradient; weight = weight - lr * velocity.
void momentum_update(Matrix& weight, Matrix& velocity, const Matrix& gradient, float lr, float momentum) {
  for (std::size_t i = 0; i < weight.values().size(); ++i) {
    const float v = momentum * velocity.values()[i] + gradient.values()[i];
    velocity.values()[i] = v;
    weight.values()[i] = weight.values()[i] - lr * v;
  }
}

bool finite(const Matrix& m) {
  for (const float v : m.values()) {
    if (!std::isfinite(v)) {
      return false;
    }
  }
  return true;
}

} // namespace

MlpWeights MlpWeights::zeros(std::uint32_t dim) {
  return {Matrix(dim, dim), Matrix(1, dim), Matrix(dim, dim), Matrix(1, dim)};
}

bool MlpWeights::all_finite() const {
  return finite(w1) && finite(b1) && finite(w2) && finite(b2);
}

bool MlpWeights::bitwise_equal(const MlpWeights& other) const {
  return w1.bitwise_equal(other.w1) && b1.bitwise_equal(other.b1) && w2.bitwise_equal(other.w2) &&
         b2.bitwise_equal(other.b2);
}

TeacherStudentTask::TeacherStudentTask(ModelConfig config) : config_(config) {
  if (config_.dim == 0 || config_.batch == 0) {
    throw std::invalid_argument("the model needs a positive width and batch size");
  }
  const std::uint32_t d = config_.dim;
  // Scaled so that the teacher's pre-activations have unit variance: tanh bends them noticeably.
  const float scale = 3.0F / std::sqrt(static_cast<float>(d));
  teacher_.w1 = random_matrix(d, d, scale, config_.seed, Stream::teacher_w1);
  teacher_.b1 = random_matrix(1, d, 0.5F, config_.seed, Stream::teacher_b1);
  teacher_.w2 = random_matrix(d, d, scale, config_.seed, Stream::teacher_w2);
  teacher_.b2 = random_matrix(1, d, 0.5F, config_.seed, Stream::teacher_b2);
}

TrainingState TeacherStudentTask::initial_state() const {
  const std::uint32_t d = config_.dim;
  const float scale = 1.0F / std::sqrt(static_cast<float>(d));
  TrainingState state;
  state.weights = MlpWeights::zeros(d);
  state.weights.w1 = random_matrix(d, d, scale, config_.seed, Stream::student_w1);
  state.weights.w2 = random_matrix(d, d, scale, config_.seed, Stream::student_w2);
  state.velocity = MlpWeights::zeros(d);
  return state;
}

Batch TeacherStudentTask::batch(std::uint64_t step) const {
  Batch batch;
  batch.inputs = random_matrix(config_.batch, config_.dim, 1.0F, config_.seed, Stream::inputs, step);
  batch.targets = teacher_forward(teacher_, batch.inputs);
  return batch;
}

StepReport TeacherStudentTask::train_step(TrainingState& state, SystolicArray& mxu) const {
  StepReport report;
  report.step = state.step + 1;
  report.mxu.array_size = mxu.size();
  const Batch data = batch(report.step);
  const MlpWeights& w = state.weights;

  // Forward: z = x W1 + b1, h = tanh(z), y = h W2 + b2.
  Matrix hidden = mxu.multiply(data.inputs, w.w1, &report.mxu);
  add_bias(hidden, w.b1);
  for (float& v : hidden.values()) {
    v = std::tanh(v);
  }
  Matrix out = mxu.multiply(hidden, w.w2, &report.mxu);
  add_bias(out, w.b2);

  // Loss: the mean over the batch and the outputs of (y - target)^2; its gradient dL/dy = 2 (y - target) / count.
  const auto count = static_cast<float>(out.values().size());
  Matrix grad_out(out.rows(), out.cols());
  double squared_error = 0;
  for (std::size_t i = 0; i < out.values().size(); ++i) {
    const float error = out.values()[i] - data.targets.values()[i];
    squared_error += static_cast<double>(error) * static_cast<double>(error);
    grad_out.values()[i] = 2.0F * error / count;
  }
  report.loss = squared_error / static_cast<double>(count);
  if (!std::isfinite(report.loss)) {
    return report;
  }

  // Backward: dW2 = h^T dy, db2 = sum of dy, dh = dy W2^T, dz = dh (1 - h^2), dW1 = x^T dz, db1 = sum of dz.
  MlpWeights grad;
  grad.w2 = mxu.multiply(transpose(hidden), grad_out, &report.mxu);
  grad.b2 = column_sums(grad_out);
  Matrix grad_hidden = mxu.multiply(grad_out, transpose(w.w2), &report.mxu);
  for (std::size_t i = 0; i < grad_hidden.values().size(); ++i) {
    const float h = hidden.values()[i];
    grad_hidden.values()[i] = grad_hidden.values()[i] * (1.0F - h * h);
  }
  grad.w1 = mxu.multiply(transpose(data.inputs), grad_hidden, &report.mxu);
  grad.b1 = column_sums(grad_hidden);
  if (!grad.all_finite()) {
    report.loss = std::numeric_limits<double>::quiet_NaN();
    return report;
  }

  const auto lr = static_cast<float>(config_.learning_rate);
  const auto momentum = static_cast<float>(config_.momentum);
  MlpWeights& v = state.velocity;
  momentum_update(state.weights.w1, v.w1, grad.w1, lr, momentum);
  momentum_update(state.weights.b1, v.b1, grad.b1, lr, momentum);
  momentum_update(state.weights.w2, v.w2, grad.w2, lr, momentum);
  momentum_update(state.weights.b2, v.b2, grad.b2, lr, momentum);
  state.step = report.step;
  report.applied = true;
  return report;
}

std::uint64_t weights_checksum(const MlpWeights& weights) {
  std::uint64_t hash = kFnv1a64Basis;
  for (const Matrix* m : {&weights.w1, &weights.b1, &weights.w2, &weights.b2}) {
    for (const float value : m->values()) {
      const auto bits = std::bit_cast<std::uint32_t>(value);
      const char bytes[4] = {static_cast<char>(bits & 0xFFU), static_cast<char>((bits >> 8) & 0xFFU),
                             static_cast<char>((bits >> 16) & 0xFFU), static_cast<char>((bits >> 24) & 0xFFU)};
      hash = fnv1a64(std::string_view(bytes, 4), hash);
    }
  }
  return hash;
}

} // namespace jobman::systolic
