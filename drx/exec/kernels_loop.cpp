// scan and while_loop: bodies are compiled once, with the outer program; a
// call runs them in a loop on raw pointers. scan's bodies read their x slices
// and write their y slices in place, and the carry alternates between the
// results and a scratch block, arranged so that the last iteration writes the
// results. Each call takes a scratch block of its own (run() may be called from several
// threads at once: a scan inside a map_fn body) from the kernel's spare blocks, and gives it
// back after: a fresh block would first-touch all its pages at every call, and a local-steps
// scan's carry is a whole model with its optimiser state.
#include <cstddef>
#include <cstring>
#include <memory>

#include "drx/exec/kernels.h"
#include "drx/exec/spares.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/scan_params.h"
#include "drx/transforms/while_params.h"

namespace drx::exec {
namespace {

// Where each carry variable sits in a scratch block; each starts at the alignment
// Array's own buffers have, which kernels may rely on. Keeps the blocks calls gave back.
class CarryLayout {
 public:
  CarryLayout(const std::vector<int>& vars, const CompileContext& cx) {
    constexpr size_t align = alignof(std::max_align_t);
    for (int v : vars) {
      offset_.push_back(total_);
      bytes_.push_back(cx.var(v).nbytes);
      total_ += (cx.var(v).nbytes + align - 1) / align * align;
    }
  }
  CarryLayout(const CarryLayout&) = delete;
  CarryLayout& operator=(const CarryLayout&) = delete;

  void* at(std::byte* block, size_t k) const { return block + offset_[k]; }
  size_t bytes(size_t k) const { return bytes_[k]; }
  size_t size() const { return bytes_.size(); }

  std::unique_ptr<std::byte[]> take() const {
    return spare_.take([&] { return std::unique_ptr<std::byte[]>(new std::byte[total_ + 1]); });
  }
  void give_back(std::unique_ptr<std::byte[]> block) const { spare_.give_back(std::move(block)); }
  // The spare blocks' pages go back to the system (their next use faults in zeroed pages).
  void discard_spare() const {
    if (total_ >= kDiscardBytes)
      spare_.for_each_free([&](std::byte* b) { discard_pages(b, total_); });
  }

 private:
  std::vector<size_t> offset_, bytes_;
  size_t total_ = 0;
  Spares<std::byte[]> spare_;
};

// A call's scratch block, given back to its layout however the call ends.
class Scratch {
 public:
  explicit Scratch(const CarryLayout& c) : c_(c) {}
  ~Scratch() { c_.give_back(std::move(block_)); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::byte* get() {
    if (!block_) block_ = c_.take();
    return block_.get();
  }

 private:
  const CarryLayout& c_;
  std::unique_ptr<std::byte[]> block_;
};

void copy_carry(const CarryLayout& c, const std::vector<const void*>& from, size_t first,
                const std::vector<void*>& to) {
  for (size_t k = 0; k < c.size(); ++k)
    if (c.bytes(k) && to[k] != from[first + k]) std::memcpy(to[k], from[first + k], c.bytes(k));
}

size_t slice_bytes(const VarInfo& v, int64_t length) {
  return length == 0 ? 0 : v.nbytes / static_cast<size_t>(length);
}

class ScanKernel : public Kernel {
 public:
  ScanKernel(const Eqn& e, const CompileContext& cx, size_t num_consts, size_t num_carry,
             int64_t length, bool reverse, Executable body)
      : ins_(e.ins),
        outs_(e.outs),
        num_consts_(num_consts),
        num_carry_(num_carry),
        length_(length),
        reverse_(reverse),
        carry_(std::vector<int>(e.outs.begin(),
                                e.outs.begin() + static_cast<std::ptrdiff_t>(num_carry)),
               cx),
        body_(std::move(body)) {
    for (size_t k = 0; k < num_carry; ++k)
      in_place_.push_back(body_.output_may_overwrite_input(k, num_consts + k));
    for (size_t k = num_consts + num_carry; k < ins_.size(); ++k)
      x_slice_.push_back(slice_bytes(cx.var(ins_[k]), length));
    for (size_t k = num_carry; k < outs_.size(); ++k)
      y_slice_.push_back(slice_bytes(cx.var(outs_[k]), length));
  }

  void run(Frame& f) const override {
    const size_t nc = num_consts_, nk = num_carry_;
    std::vector<const void*> in(ins_.size());
    for (size_t k = 0; k < nc + nk; ++k) in[k] = f.in(ins_[k]);
    std::vector<void*> final_carry(nk), out(outs_.size());
    for (size_t k = 0; k < nk; ++k) final_carry[k] = f.out(outs_[k]);
    std::vector<std::byte*> ys(y_slice_.size());
    for (size_t j = 0; j < ys.size(); ++j) ys[j] = static_cast<std::byte*>(f.out(outs_[nk + j]));
    if (length_ == 0) return copy_carry(carry_, in, nc, final_carry);
    std::vector<const std::byte*> xs(x_slice_.size());
    for (size_t j = 0; j < xs.size(); ++j)
      xs[j] = static_cast<const std::byte*>(f.in(ins_[nc + nk + j]));
    Scratch scratch(carry_);
    // A carry the body may write over its own input (an optimiser step's parameters) lives in
    // the results from the start; the others alternate between the results and the scratch.
    for (size_t k = 0; k < nk; ++k)
      if (in_place_[k]) {
        if (final_carry[k] != in[nc + k] && carry_.bytes(k))
          std::memcpy(final_carry[k], in[nc + k], carry_.bytes(k));
        in[nc + k] = final_carry[k];
      }
    for (int64_t i = 0; i < length_; ++i) {
      const size_t t = static_cast<size_t>(reverse_ ? length_ - 1 - i : i);
      // Iterations alternate destinations, so the last one (i = length - 1) writes the results.
      const bool to_results = (length_ - 1 - i) % 2 == 0;
      for (size_t k = 0; k < nk; ++k)
        out[k] = to_results || in_place_[k] ? final_carry[k] : carry_.at(scratch.get(), k);
      for (size_t j = 0; j < xs.size(); ++j) in[nc + nk + j] = xs[j] + t * x_slice_[j];
      for (size_t j = 0; j < ys.size(); ++j) out[nk + j] = ys[j] + t * y_slice_[j];
      body_.run_raw(in.data(), out.data());
      for (size_t k = 0; k < nk; ++k) in[nc + k] = out[k];
    }
  }

  void release_idle_memory() const override {
    carry_.discard_spare();
    body_.release_idle_memory();
  }

 private:
  std::vector<int> ins_, outs_;
  size_t num_consts_, num_carry_;
  int64_t length_;
  bool reverse_;
  CarryLayout carry_;
  std::vector<size_t> x_slice_, y_slice_;
  Executable body_;
  std::vector<bool> in_place_;  // per carry: the body may write it over its input
};

bool leading_is(const VarInfo& v, int64_t length) {
  return !v.shape.empty() && v.shape[0] == length;
}

std::optional<KernelSpec> scan(const Eqn& e, const CompileContext& cx) {
  // A missing or mistyped parameter throws here, at compile, rather than
  // leaving the equation to the interpreter.
  const ScanParams s = ScanParams::of(e);
  const Program* body = s.body.get();
  const size_t nc = s.nc(), nk = s.nh();
  if (nc + nk > e.ins.size() || nk > e.outs.size() || body->inputs.size() != e.ins.size() ||
      body->outputs.size() != e.outs.size())
    return std::nullopt;
  for (size_t k = 0; k < nk; ++k)
    if (cx.var(e.ins[nc + k]).nbytes != cx.var(e.outs[k]).nbytes) return std::nullopt;
  for (size_t k = nc + nk; k < e.ins.size(); ++k)
    if (!leading_is(cx.var(e.ins[k]), s.length)) return std::nullopt;
  for (size_t k = nk; k < e.outs.size(); ++k)
    if (!leading_is(cx.var(e.outs[k]), s.length)) return std::nullopt;
  return spec<ScanKernel>(Alias::none, e, cx, nc, nk, s.length, s.reverse,
                          compile(*body, cx.mesh, cx.options));
}

class WhileKernel : public Kernel {
 public:
  WhileKernel(const Eqn& e, const CompileContext& cx, size_t num_cond_consts,
              size_t num_body_consts, Executable cond, Executable body)
      : ins_(e.ins),
        outs_(e.outs),
        num_cond_consts_(num_cond_consts),
        num_body_consts_(num_body_consts),
        carry_(e.outs, cx),
        cond_(std::move(cond)),
        body_(std::move(body)) {}

  void run(Frame& f) const override {
    const size_t ncc = num_cond_consts_, nbc = num_body_consts_, nk = outs_.size();
    const size_t first_carry = ncc + nbc;
    std::vector<const void*> cond_in(ncc + nk), body_in(nbc + nk);
    for (size_t k = 0; k < ncc; ++k) cond_in[k] = f.in(ins_[k]);
    for (size_t k = 0; k < nbc; ++k) body_in[k] = f.in(ins_[ncc + k]);
    std::vector<const void*> carry(nk);
    for (size_t k = 0; k < nk; ++k) carry[k] = f.in(ins_[first_carry + k]);
    std::vector<void*> results(nk), scratch_at(nk), dst(nk);
    for (size_t k = 0; k < nk; ++k) results[k] = f.out(outs_[k]);
    // The trip count is unknown, so the carry alternates from the results on
    // and is copied there at the end when it is elsewhere.
    Scratch scratch(carry_);
    bool have_scratch = false;
    bool in_results = false;
    uint8_t pred = 0;
    void* pred_out = &pred;
    for (;;) {
      for (size_t k = 0; k < nk; ++k) cond_in[ncc + k] = carry[k];
      cond_.run_raw(cond_in.data(), &pred_out);
      if (!pred) break;
      if (in_results && !have_scratch) {
        have_scratch = true;
        for (size_t k = 0; k < nk; ++k) scratch_at[k] = carry_.at(scratch.get(), k);
      }
      for (size_t k = 0; k < nk; ++k) {
        body_in[nbc + k] = carry[k];
        dst[k] = in_results ? scratch_at[k] : results[k];
      }
      body_.run_raw(body_in.data(), dst.data());
      for (size_t k = 0; k < nk; ++k) carry[k] = dst[k];
      in_results = !in_results;
    }
    if (!in_results) copy_carry(carry_, carry, 0, results);
  }

  void release_idle_memory() const override {
    carry_.discard_spare();
    cond_.release_idle_memory();
    body_.release_idle_memory();
  }

 private:
  std::vector<int> ins_, outs_;
  size_t num_cond_consts_, num_body_consts_;
  CarryLayout carry_;
  Executable cond_, body_;
};

std::optional<KernelSpec> while_loop(const Eqn& e, const CompileContext& cx) {
  // As scan: a missing or mistyped parameter is an error at compile.
  const WhileParams w = WhileParams::of(e);
  const Program *cond = w.cond.get(), *body = w.body.get();
  const size_t cc = w.ncc(), bc = w.nbc();
  if (cc + bc > e.ins.size()) return std::nullopt;
  const size_t nk = e.ins.size() - cc - bc;
  if (e.outs.size() != nk || cond->inputs.size() != cc + nk || body->inputs.size() != bc + nk ||
      body->outputs.size() != nk || cond->outputs.size() != 1)
    return std::nullopt;
  const Type& pred = cond->type_of(cond->outputs[0]);
  if (pred.dtype != DType::bool_ || !pred.shape.empty()) return std::nullopt;
  for (size_t k = 0; k < nk; ++k)
    if (cx.var(e.ins[cc + bc + k]).nbytes != cx.var(e.outs[k]).nbytes) return std::nullopt;
  return spec<WhileKernel>(Alias::none, e, cx, cc, bc, compile(*cond, cx.mesh, cx.options),
                           compile(*body, cx.mesh, cx.options));
}

}  // namespace

void add_loop_kernels(KernelTable& t) {
  t[&prims::scan()] = scan;
  t[&prims::while_loop()] = while_loop;
}

}  // namespace drx::exec
