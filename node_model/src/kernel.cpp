#include "tessera/node_model/kernel.hpp"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "tessera/error.hpp"
#include "tessera/names.hpp"

namespace tessera::node_model {
namespace {
constexpr std::array<std::pair<KernelOp, std::string_view>, 17> kNames{{
    {KernelOp::Bmm, "bmm"},       {KernelOp::Linear, "linear"}, {KernelOp::Add, "add"},
    {KernelOp::AddU, "addu"},     {KernelOp::Mul, "mul"},       {KernelOp::MulU, "mulu"},
    {KernelOp::Div, "div"},       {KernelOp::DivU, "divu"},     {KernelOp::Pow, "pow"},
    {KernelOp::PowU, "powu"},     {KernelOp::Gelu, "gelu"},     {KernelOp::Relu, "relu"},
    {KernelOp::Tanh, "tanh"},     {KernelOp::Softmax, "softmax"}, {KernelOp::LayerNorm, "ln"},
    {KernelOp::Copy, "copy"},     {KernelOp::Copy, "memcpy"},
}};

/// Operand tensors read per output element for vector ops.
int vector_inputs(KernelOp op) {
  switch (op) {
    case KernelOp::Add: case KernelOp::Mul: case KernelOp::Div: case KernelOp::Pow: return 2;
    default: return 1;
  }
}

/// Arithmetic per element (rough instruction counts; these ops are memory-bound).
double vector_flops_per_element(KernelOp op) {
  switch (op) {
    case KernelOp::Gelu: return 8.0;
    case KernelOp::Tanh: return 6.0;
    case KernelOp::Pow: case KernelOp::PowU: return 4.0;
    case KernelOp::Softmax: return 5.0;
    case KernelOp::LayerNorm: return 8.0;
    case KernelOp::Copy: return 0.0;
    default: return 1.0;
  }
}
}  // namespace

std::string_view to_string(KernelOp op) {
  for (const auto& [o, n] : kNames) {
    if (o == op) return n;
  }
  return "?";
}

KernelOp parse_kernel_op(std::string_view name) {
  // Any case: NeuSight's files write the names in lower case, a user's may
  // write `Linear` or `BMM` (as the dtype column may write `BF16`).
  // Spaces around it are read past, as around numbers (csv.hpp).
  const std::string lower = ascii_lower(trim_blanks(name));
  for (const auto& [o, n] : kNames) {
    if (n == lower) return o;
  }
  std::string expected;
  for (const auto& [o, n] : kNames) expected += fmt::format("{}{}", expected.empty() ? "" : ", ", n);
  throw InputError(fmt::format("unknown op '{}' (expected {})", name, expected));
}

bool is_gemm(KernelOp op) { return op == KernelOp::Bmm || op == KernelOp::Linear; }

std::array<Kernel, 2> softmax_backward(const Kernel& forward) {
  if (forward.op != KernelOp::Softmax) {
    throw InputError(fmt::format("softmax_backward: expected a softmax kernel, got '{}'", to_string(forward.op)));
  }
  return {forward, Kernel::vector(KernelOp::Mul, forward.b, forward.h, forward.dtype)};
}

Kernel Kernel::gemm(KernelOp op, std::int64_t b, std::int64_t m, std::int64_t n, std::int64_t k,
                    DType dtype) {
  Kernel x;
  x.op = op;
  x.dtype = dtype;
  x.b = b;
  x.m = m;
  x.n = n;
  x.k = k;
  return x;
}

Kernel Kernel::vector(KernelOp op, std::int64_t rows, std::int64_t cols, DType dtype) {
  Kernel x;
  x.op = op;
  x.dtype = dtype;
  x.b = rows;
  x.h = cols;
  return x;
}

Flops Kernel::flops() const {
  if (is_gemm(op)) {
    return Flops(2.0 * static_cast<double>(b) * static_cast<double>(m) * static_cast<double>(n) *
                 static_cast<double>(k));
  }
  return Flops(vector_flops_per_element(op) * static_cast<double>(b) * static_cast<double>(h));
}

namespace {
/// A kernel's DRAM traffic in T: int64 for bytes(), double for validate()'s
/// overflow check (one formula for both).
template <typename T>
T traffic(const Kernel& x) {
  const T e = static_cast<T>(dtype_bytes(x.dtype));
  const T b = static_cast<T>(x.b), m = static_cast<T>(x.m), n = static_cast<T>(x.n), k = static_cast<T>(x.k);
  if (x.op == KernelOp::Linear)
    return e * (b * m * k + k * n + b * m * n);  // weights shared across the batch
  if (x.op == KernelOp::Bmm) return e * b * (m * k + k * n + m * n);
  return e * b * static_cast<T>(x.h) * static_cast<T>(vector_inputs(x.op) + 1);
}
}  // namespace

Bytes Kernel::bytes() const { return Bytes(traffic<std::int64_t>(*this)); }

void Kernel::validate() const {
  auto need = [&](std::int64_t v, std::string_view dim) {
    if (v <= 0) {
      throw InputError(fmt::format("{} kernel: dimension {} must be positive (got {})",
                                   to_string(op), dim, v));
    }
  };
  need(b, "B");
  if (is_gemm(op)) {
    need(m, "M");
    need(n, "N");
    need(k, "K");
  } else {
    need(h, "H");
  }
  // bytes() counts in 64-bit integers: dimensions whose traffic passes 2^62
  // bytes (4 EiB, no GPU's) would wrap around to a wrong, small time.
  if (const double bytes = traffic<double>(*this); bytes > 0x1p62) {
    throw OverflowError(
        fmt::format("{} kernel: its dimensions move {:.3g} bytes, more than the 2^62 (4 EiB) a "
                    "kernel may (a dimension too large?)",
                    to_string(op), bytes));
  }
}

}  // namespace tessera::node_model
