#include "systolic/model.hpp"

#include "systolic/hashing.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>
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

// A rows x cols matrix of uniform draws scaled by `scale`: draws first_index, first_index + 1, ... row by row.
Matrix random_matrix(std::size_t rows, std::size_t cols, float scale, std::uint64_t seed, Stream stream,
                     std::uint64_t step = 0, std::uint64_t first_index = 0) {
  Matrix m(rows, cols);
  for (std::size_t i = 0; i < m.values().size(); ++i) {
    m.values()[i] = scale * uniform(seed, stream, step, first_index + i);
  }
  return m;
}

// Row `row` of `m` as a column (cols x 1).
Matrix row_as_column(const Matrix& m, std::size_t row) {
  Matrix column(m.cols(), 1);
  for (std::size_t c = 0; c < m.cols(); ++c) {
    column.at(c, 0) = m.at(row, c);
  }
  return column;
}

// Row `row` of `m` as a 1 x cols matrix.
Matrix row_of(const Matrix& m, std::size_t row) {
  Matrix out(1, m.cols());
  for (std::size_t c = 0; c < m.cols(); ++c) {
    out.at(0, c) = m.at(row, c);
  }
  return out;
}

// Adds every element of `terms` to the sum of the same index.
void add_all(std::vector<FloatSum>& sums, const std::vector<float>& terms) {
  for (std::size_t i = 0; i < terms.size(); ++i) {
    sums[i].add(terms[i]);
  }
}

// Each sum rounded to binary32, into a rows x cols matrix.
Matrix rounded(const std::vector<FloatSum>& sums, std::size_t rows, std::size_t cols) {
  Matrix m(rows, cols);
  for (std::size_t i = 0; i < sums.size(); ++i) {
    m.values()[i] = sums[i].to_float();
  }
  return m;
}

// The number of squared errors in a step's loss: batch x dim, as a float (the divisor of the loss gradient).
float output_count(const ModelConfig& config) {
  return static_cast<float>(static_cast<std::size_t>(config.batch) * config.dim);
}

// Adds the 1 x N row `bias` to every row of `m`.
void add_bias(Matrix& m, const Matrix& bias) {
  for (std::size_t r = 0; r < m.rows(); ++r) {
    for (std::size_t c = 0; c < m.cols(); ++c) {
      m.at(r, c) = m.at(r, c) + bias.at(0, c);
    }
  }
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
  return batch(step, {0, config_.batch});
}

Batch TeacherStudentTask::batch(std::uint64_t step, ExampleRange examples) const {
  Batch batch;
  batch.inputs = random_matrix(examples.size(), config_.dim, 1.0F, config_.seed, Stream::inputs, step,
                               static_cast<std::uint64_t>(examples.begin) * config_.dim);
  batch.targets = teacher_forward(teacher_, batch.inputs);
  return batch;
}

PartialStep TeacherStudentTask::partial_step(const TrainingState& state, SystolicArray& mxu, ExampleRange examples,
                                             float gradient_scale) const {
  PartialStep partial;
  partial.sums = GradientSums::zeros(config_.dim);
  partial.mxu.array_size = mxu.size();
  if (examples.size() == 0) {
    return partial;
  }
  const Batch data = batch(state.step + 1 + state.data_shift, examples);
  const MlpWeights& w = state.weights;

  // Forward: z = x W1 + b1, h = tanh(z), y = h W2 + b2. Each row of a product depends on its own example only.
  Matrix hidden = mxu.multiply(data.inputs, w.w1, &partial.mxu);
  add_bias(hidden, w.b1);
  for (float& v : hidden.values()) {
    v = std::tanh(v);
  }
  Matrix out = mxu.multiply(hidden, w.w2, &partial.mxu);
  add_bias(out, w.b2);

  // Loss: the mean over the whole batch and the outputs of (y - target)^2; its gradient dL/dy = 2 (y - target) /
  // count, count being the whole batch's.
  const float count = output_count(config_);
  Matrix grad_out(out.rows(), out.cols());
  bool finite_loss = true;
  for (std::size_t i = 0; i < out.values().size(); ++i) {
    const float error = out.values()[i] - data.targets.values()[i];
    // A binary32 squared is exact in binary64.
    partial.sums.squared_error.add(static_cast<double>(error) * static_cast<double>(error));
    finite_loss = finite_loss && std::isfinite(error);
    grad_out.values()[i] = 2.0F * error / count;
  }
  if (!finite_loss) {
    return partial;
  }
  if (gradient_scale != 1.0F) {
    for (float& v : grad_out.values()) {
      v = v * gradient_scale;
    }
  }

  // Backward: dh = dy W2^T, dz = dh (1 - h^2) (row by row again); then per example b the rank-one contributions
  // dW2_b = h_b^T dy_b and dW1_b = x_b^T dz_b (products with K = 1 on the array: each element one rounded multiply),
  // and db2_b = dy_b, db1_b = dz_b, all added to exact sums.
  Matrix grad_hidden = mxu.multiply(grad_out, transpose(w.w2), &partial.mxu);
  for (std::size_t i = 0; i < grad_hidden.values().size(); ++i) {
    const float h = hidden.values()[i];
    grad_hidden.values()[i] = grad_hidden.values()[i] * (1.0F - h * h);
  }
  for (std::size_t b = 0; b < examples.size(); ++b) {
    add_all(partial.sums.w2, mxu.multiply(row_as_column(hidden, b), row_of(grad_out, b), &partial.mxu).values());
    add_all(partial.sums.w1,
            mxu.multiply(row_as_column(data.inputs, b), row_of(grad_hidden, b), &partial.mxu).values());
    add_all(partial.sums.b2, row_of(grad_out, b).values());
    add_all(partial.sums.b1, row_of(grad_hidden, b).values());
  }
  return partial;
}

StepReport TeacherStudentTask::apply_step(TrainingState& state, const GradientSums& sums,
                                          const ProductStats& mxu) const {
  StepReport report;
  report.step = state.step + 1;
  report.mxu = mxu;
  report.loss = sums.squared_error.to_double() / static_cast<double>(output_count(config_));
  if (!std::isfinite(report.loss)) {
    return report;
  }
  const std::uint32_t d = config_.dim;
  MlpWeights grad;
  grad.w1 = rounded(sums.w1, d, d);
  grad.b1 = rounded(sums.b1, 1, d);
  grad.w2 = rounded(sums.w2, d, d);
  grad.b2 = rounded(sums.b2, 1, d);
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

StepReport TeacherStudentTask::train_step(TrainingState& state, SystolicArray& mxu, float gradient_scale) const {
  const PartialStep partial = partial_step(state, mxu, {0, config_.batch}, gradient_scale);
  return apply_step(state, partial.sums, partial.mxu);
}

ExampleRange batch_share(std::uint32_t batch, std::uint32_t slice, std::uint32_t slices) {
  const auto bound = [&](std::uint32_t s) {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(s) * batch / slices);
  };
  return {bound(slice), bound(slice + 1)};
}

GradientSums GradientSums::zeros(std::uint32_t dim) {
  GradientSums sums;
  const std::size_t square = static_cast<std::size_t>(dim) * dim;
  sums.w1.resize(square);
  sums.b1.resize(dim);
  sums.w2.resize(square);
  sums.b2.resize(dim);
  return sums;
}

GradientSums& GradientSums::operator+=(const GradientSums& other) {
  if (w1.size() != other.w1.size() || b1.size() != other.b1.size()) {
    throw std::invalid_argument("gradient sums of models of different widths");
  }
  squared_error += other.squared_error;
  for (auto [mine, theirs] :
       {std::pair{&w1, &other.w1}, std::pair{&b1, &other.b1}, std::pair{&w2, &other.w2}, std::pair{&b2, &other.b2}}) {
    for (std::size_t i = 0; i < mine->size(); ++i) {
      (*mine)[i] += (*theirs)[i];
    }
  }
  return *this;
}

std::string GradientSums::encode() const {
  std::string bytes;
  bytes.reserve(SquareSum::kEncodedSize + FloatSum::kEncodedSize * (w1.size() + b1.size() + w2.size() + b2.size()));
  squared_error.encode(bytes);
  for (const auto* sums : {&w1, &b1, &w2, &b2}) {
    for (const FloatSum& sum : *sums) {
      sum.encode(bytes);
    }
  }
  return bytes;
}

std::optional<GradientSums> GradientSums::decode(std::string_view bytes, std::uint32_t dim) {
  GradientSums sums = zeros(dim);
  const std::size_t terms = sums.w1.size() + sums.b1.size() + sums.w2.size() + sums.b2.size();
  if (bytes.size() != SquareSum::kEncodedSize + FloatSum::kEncodedSize * terms) {
    return std::nullopt;
  }
  if (!sums.squared_error.decode(bytes)) {
    return std::nullopt;
  }
  bytes.remove_prefix(SquareSum::kEncodedSize);
  for (auto* part : {&sums.w1, &sums.b1, &sums.w2, &sums.b2}) {
    for (FloatSum& sum : *part) {
      if (!sum.decode(bytes)) {
        return std::nullopt;
      }
      bytes.remove_prefix(FloatSum::kEncodedSize);
    }
  }
  return sums;
}

std::string describe_config_differences(const ModelConfig& there, const ModelConfig& here,
                                        const std::string& there_name, const std::string& here_name) {
  std::ostringstream text;
  const auto field = [&](const char* option, const auto& a, const auto& b) {
    if (a != b) {
      text << (text.tellp() > 0 ? ", " : "") << option << " " << a << " " << there_name << ", " << b << " "
           << here_name;
    }
  };
  field("--dim", there.dim, here.dim);
  field("--batch", there.batch, here.batch);
  field("--seed", there.seed, here.seed);
  field("--lr", there.learning_rate, here.learning_rate);
  field("--momentum", there.momentum, here.momentum);
  return text.str();
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
