// The oneDNN glue of generated models (foundry_dnnl.h says what externs.cpp sees of it):
// convolutions and matrix products built once when the model is created (constant convolution
// weights reordered then into the layout oneDNN prefers) and executed on every run. foundryc
// writes this file beside every model with library calls and compiles it once per compiler and
// flags (the compile cache keeps the object), so that dnnl.hpp stays out of the model's own
// translation units.
#include "foundry_dnnl.h"

#include <oneapi/dnnl/dnnl.hpp>

#include "foundry_vec.h"  // the float16 conversions

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include <unistd.h>  // sysconf: the cache size

namespace foundry_rt {
namespace dnnl_glue {

using mdt = dnnl::memory::data_type;

static_assert(kRuntimeDim == DNNL_RUNTIME_DIM_VAL, "kRuntimeDim is oneDNN's runtime dimension");

mdt to_dnnl(dt type) {
  switch (type) {
    case dt::f16: return mdt::f16;
    case dt::bf16: return mdt::bf16;
    case dt::f32: break;
  }
  return mdt::f32;
}

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::desc strided(const dims& sizes, const dims& strides, mdt type = mdt::f32) {
  return dnnl::memory::desc(sizes, type, strides);
}

bool is_16bit_float(mdt type) { return type == mdt::f16 || type == mdt::bf16; }

// The type a primitive computes in for operands of `type`: their own, or float32 for float16 and
// bfloat16 when this oneDNN has no kernel for them on this CPU (float16 on oneDNN 2.x's CPUs,
// bfloat16 on AVX2 without AVX-512: it then converts each operand into a float32 copy, exactly,
// and the result back, rounded once, as float32 accumulation does).
mdt compute_type(mdt type, bool native_failed) { return is_16bit_float(type) && native_failed ? mdt::f32 : type; }

// Builds `p` (a ConvPrimitive or a MatmulPrimitive) computing in its operands' type, or for a 16-bit float type,
// when oneDNN has no kernel for it on this CPU, in float32 on converted operands; `p.ok` says
// whether it built.
template <typename Primitive, typename Spec>
void build_with_f32_fallback(Primitive& p, const Spec& spec) {
  for (bool native_failed : {false, true}) {
    try {
      p.build_as(spec, compute_type(to_dnnl(spec.data_type), native_failed));
      p.ok = true;
      return;
    } catch (const dnnl::error& e) {
      p.error = e.what();
    }
    if (!is_16bit_float(to_dnnl(spec.data_type))) return;
  }
}

// One core's second-level cache in bytes (1 MiB where the system does not say).
double core_cache_bytes() {
  static const double bytes = [] {
    long n = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return n > 0 ? static_cast<double>(n) : 1048576.0;
  }();
  return bytes;
}

// The team of a call of `macs` multiply-adds moving `elements` operand elements (4 bytes each: the
// float32 case) among at most `cap` threads, in a model of `weight_bytes` of constant weights. Its
// one-thread time is that of the multiply-adds or of the bytes from memory, whichever is longer;
// when the model's weights and the call's operands fit one core's cache they stay there from run
// to run, and the multiply-adds alone count (encoder_layer's [16,2,64]x[16,64,192] product: 11 us,
// not the 57 us of its bytes from memory).
double call_serial_ns(double macs, double elements, double weight_bytes) {
  double bytes = 4 * elements;
  bool cached = weight_bytes + bytes <= core_cache_bytes();
  return std::max(macs * kNsPerMac, cached ? 0.0 : bytes * kNsPerByte);
}
int call_team(double macs, double elements, double weight_bytes, int cap) {
  return team_for(call_serial_ns(macs, elements, weight_bytes), cap, kDnnlTeamNs);
}

// Whether a call's estimate is too close to trust: what the team would save on it is within a
// factor of kCloseCall of what the team costs. Such a call is built for both teams at creation and
// timed (keep_faster_team). The estimates miss by 2-3x either way: squeezenet1_1's 1x1
// convolutions, estimated at 21 us, took 45-68 us on one thread.
// Regions measured slow widen the range down to the cost with a region of idle cores: the call's
// team lasts for its life, and a measure of the moment is not enough to settle it. On the 16-core
// host (a virtual machine) spells of 360-630 us regions kept unet's convolutions of 190-755 us and
// vit_block's products of 1.2 ms on one thread for the process's life: some by their estimates,
// some timed 1.4-2.9x faster on the team but short of the two slow regions' saving asked of them.
constexpr double kCloseCall = 4;
// The rule, with parallel regions of `region_ns` (close_call measures them).
bool close_call_at(double serial_ns, int cap, double region_ns) {
  const double saved = serial_ns * (1.0 - 1.0 / cap);
  const double cost = kDnnlTeamNs + region_payback() * region_ns;
  const double idle_cost = kDnnlTeamNs + region_payback() * std::min(region_ns, kSlowRegionNs);
  return saved >= idle_cost / kCloseCall && saved <= cost * kCloseCall;
}
bool close_call(double serial_ns, int cap) {
  if (cap <= 1 || region_payback() == 0) return false;
  // Far below the cost with the cheapest region: clear, without measuring regions (which starts
  // the pool's threads).
  if (serial_ns * (1.0 - 1.0 / cap) < (kDnnlTeamNs + region_payback() * kMinRegionNs) / kCloseCall) return false;
  return close_call_at(serial_ns, cap, parallel_region_ns(cap));
}

// A call timed at creation may keep the primitive built for the other team too (its `twin`, see
// keep_faster_team), and each run takes one of the two, as a generated kernel's step takes its
// team: one thread while parallel regions measure slow now (a busy spell: the kernels' steps stay
// on one thread too); otherwise the team chosen at creation, unless that choice was made while
// the regions measured slow (`provisional`): then the estimate decides, as for any step. A team
// chosen at creation in such a spell, or a thread alone chosen in one, no longer lasts for the
// process's life: on the 16-core host (a virtual machine) such spells put vit_block's products on
// one thread in 3 of 5 processes at 16 threads (2.6-2.9 ms a run against 0.57-1.2 ms in the others).
int twin_team_now(int built_team, int cap, bool provisional, double serial_ns, double region_ns) {
  if (region_ns > kSlowRegionNs) return 1;
  if (!provisional) return built_team;
  return team_pays_at(serial_ns, cap, kDnnlTeamNs, region_ns) ? cap : 1;
}

// The call for the other team. Timed at creation, a call keeps the one its timing built (see
// keep_faster_team). Put on the team by its estimate (never timed), a call builds the same call for
// one thread when a run first needs it: without it, such a call went on waiting out time slices
// through every busy spell (with both cores of the 2-core machine busy, mobilenet_v3_small's last
// product, 290 us on one thread and on two by its estimate, stalled in runs made 0.1 ms apart, 3
// ms each time, whatever the stall watch held). Built on need, not at creation: built there, the
// one-thread calls of resnet50 on two threads took 23 MB more (some weights laid out apart), which
// an idle machine never uses. Packed weights are shared with the call when laid out alike.
template <typename Primitive, typename Spec>
class Twin {
 public:
  explicit Twin(Primitive&& built) : built_(std::make_shared<const Primitive>(std::move(built))) {}
  // To build on need from `spec` for one thread; `model`, `call`: the names FOUNDRY_LOG_TEAMS=1 says.
  Twin(Spec spec, const char* model, const char* call) : spec_(std::move(spec)), model_(model), call_(call) {
    spec_.team = 1;
  }
  // The other call (built now on the first need: any thread; the others wait), or null when
  // oneDNN could not build it.
  const Primitive* get(const Primitive& call) {
    if (model_) std::call_once(building_, [&] { build_for(call); });  // also orders the read below
    return built_.get();
  }

 private:
  void build_for(const Primitive& call) {
    auto lone = std::make_shared<Primitive>();
    lone->build(spec_);
    if (log_teams())
      std::fprintf(stderr, "%s: %s, on the team by its estimate, %s for one thread while the steps keep off the team\n",
                   model_, call_, lone->ok ? "is now built" : "could not be built");
    if (!lone->ok) return;
    lone->share_constants(call);
    built_ = std::move(lone);
  }
  std::shared_ptr<const Primitive> built_;
  Spec spec_;
  const char *model_ = nullptr, *call_ = nullptr;  // set: built on need
  std::once_flag building_;
};
template <typename Primitive>
const Primitive& twin_for_run(const Primitive& p) {
  if (!p.twin) return p;
  const int team = twin_team_now(p.team, p.team_cap, p.provisional, p.serial_ns, parallel_region_ns(p.team_cap));
  if (team == p.team) return p;
  const Primitive* other = p.twin->get(p);
  return other ? *other : p;
}

// Zero-filled bytes: a call's operands when it is timed at creation.
class ZeroedBytes {
 public:
  explicit ZeroedBytes(size_t bytes) : data_(bytes ? std::calloc(1, bytes) : nullptr, &std::free) {
    if (bytes && !data_) throw std::bad_alloc();
  }
  void* get() const { return data_.get(); }

 private:
  std::unique_ptr<void, decltype(&std::free)> data_{nullptr, &std::free};
};
std::vector<ZeroedBytes> zeroed(const std::vector<size_t>& bytes) {
  std::vector<ZeroedBytes> out;
  for (size_t b : bytes) out.emplace_back(b);
  return out;
}

// The product of `d`'s entries from `first` on.
double product(const dims& d, size_t first = 0) {
  double p = 1;
  for (size_t i = first; i < d.size(); ++i) p *= static_cast<double>(d[i]);
  return p;
}

dnnl::memory wrap(const dnnl::memory::desc& md, const void* p) {
  return dnnl::memory(md, engine(), const_cast<void*>(p));
}

// The calling thread's bytes for the temporaries of library calls (operands converted or
// reordered, the scratchpad), reused by all its calls: memory from oneDNN's allocator is fresh
// pages on every call, and their page faults cost as much as a small convolution. Runs of a model
// may be concurrent, each on its own thread. The thread keeps the largest call's temporaries
// until it ends.
class ThreadScratch {
 public:
  // The calling thread's bytes, its previous call's temporaries free again.
  static ThreadScratch& start() {
    thread_local ThreadScratch scratch;
    scratch.next_ = 0;
    return scratch;
  }
  // `bytes` bytes, 64-byte aligned, valid until the thread's next start().
  void* take(size_t bytes) {
    bytes = (bytes + 63) / 64 * 64 + 64;
    if (next_ == blocks_.size()) blocks_.emplace_back(nullptr, &std::free);
    auto& block = blocks_[next_];
    if (sizes_.size() <= next_) sizes_.push_back(0);
    if (sizes_[next_] < bytes) {
      block.reset(static_cast<char*>(std::aligned_alloc(64, bytes)));
      if (!block) throw std::bad_alloc();
      sizes_[next_] = bytes;
    }
    return blocks_[next_++].get();
  }

 private:
  std::vector<std::unique_ptr<char, decltype(&std::free)>> blocks_;
  std::vector<size_t> sizes_;
  size_t next_ = 0;
};

// What one library call reuses from run to run on the calling thread: the oneDNN memory objects
// of its operands and temporaries, made on its first run and pointed at each run's data after,
// and the thread's stream. Making them on every call (two heap allocations an object, a stream,
// an argument map) cost mlp's two small products three quarters of their time, and the heap
// they reshuffled made one instance of mlp up to 1.6x slower than another on the 2-core EPYC.
class CallMemory {
 public:
  // The calling thread's memory for the call `call` (its primitive wrapper), the temporaries of
  // its previous run free again. A wrapper at the address of a destroyed one finds the objects
  // of the old one, and remakes each whose description differs.
  static CallMemory& start(const void* call) {
    thread_local std::unordered_map<const void*, CallMemory> calls;
    if (calls.size() >= kMaxCalls && !calls.count(call)) calls.clear();  // models made and destroyed
    CallMemory& memory = calls[call];
    memory.next_ = 0;
    memory.scratch_ = &ThreadScratch::start();
    return memory;
  }
  // `data`, described by `md`, as an operand.
  dnnl::memory view(const dnnl::memory::desc& md, const void* data) {
    if (next_ == objects_.size()) objects_.emplace_back();
    dnnl::memory& m = objects_[next_++];
    if (m && m.get_desc() == md)
      m.set_data_handle(const_cast<void*>(data));
    else
      m = dnnl::memory(md, engine(), const_cast<void*>(data));
    return m;
  }
  // A temporary of `md`, valid until the thread's next start() of any call.
  dnnl::memory make(const dnnl::memory::desc& md) { return view(md, scratch_->take(md.get_size())); }

  static dnnl::stream& stream() {
    thread_local dnnl::stream s(engine());
    return s;
  }

 private:
  static constexpr size_t kMaxCalls = 4096;
  std::vector<dnnl::memory> objects_;
  size_t next_ = 0;
  ThreadScratch* scratch_ = nullptr;
};

// The arguments of one primitive execution, run on the calling thread's stream through oneDNN's
// C API (its C++ one builds a map and a vector on every call).
class Args {
 public:
  // Adds `m` as argument `kind` (DNNL_ARG_*); an empty `m` (an absent bias) is left out.
  Args& add(int kind, const dnnl::memory& m) {
    if (m) args_[count_++] = {kind, m.get()};
    return *this;
  }
  void execute(const dnnl::primitive& prim) const {
    dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), CallMemory::stream().get(), count_, args_),
                            "could not execute a primitive");
  }

 private:
  dnnl_exec_arg_t args_[8];
  int count_ = 0;
};

// float16 or bfloat16 <-> float32 over the span of a strided operand, element for element (the
// two views have the same strides). oneDNN 2.x's reorders between them are its generic loop, 100x
// slower.
void convert(const dnnl::memory& src, dnnl::memory& dst) {
  const mdt from = src.get_desc().data_type(), to = dst.get_desc().data_type();
  if (is_16bit_float(from))
    foundry_vec::widen_16bit(static_cast<const uint16_t*>(src.get_data_handle()), static_cast<float*>(dst.get_data_handle()),
                             src.get_desc().get_size() / 2, from == mdt::bf16);
  else
    foundry_vec::narrow_16bit(static_cast<const float*>(src.get_data_handle()),
                              static_cast<uint16_t*>(dst.get_data_handle()), src.get_desc().get_size() / 4, to == mdt::bf16);
}

// An operand in a 16-bit float read by a primitive that computes in float32 (or in the same type: then
// nothing is done): converted into a float32 copy of the same layout, made on each call (runs may
// be concurrent), or the result converted back, rounded once.
struct Conversion {
  dnnl::memory::desc from, to;
  bool needed = false;

  void build(const dnnl::memory::desc& user, const dnnl::memory::desc& compute) {
    from = user;
    to = compute;
    needed = user != compute;
  }
  // `m` (described by `from`) as the primitive reads it: a temporary of this call in `memory`,
  // or without `memory` a copy of its own (a constant converted once at creation).
  dnnl::memory in(const dnnl::memory& m, CallMemory* memory = nullptr) const {
    if (!needed) return m;
    dnnl::memory out = memory ? memory->make(to) : dnnl::memory(to, engine());
    convert(m, out);
    return out;
  }
};

// `user` (strided) in the type the primitive computes in, with the same strides.
dnnl::memory::desc retyped(const dnnl::memory::desc& user, mdt compute) {
  if (user.data_type() == compute) return user;
  const dims sizes = user.dims();
  const auto& blocking = user.data.format_desc.blocking;
  return dnnl::memory::desc(sizes, compute, dims(blocking.strides, blocking.strides + sizes.size()));
}

// Scratchpads are user-managed and allocated per call: the library-managed one is shared by all
// threads in oneDNN builds without DNNL_ENABLE_CONCURRENT_EXEC, and runs may be concurrent.
dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The attributes of every primitive: the user scratchpad and the folded activation, if any, as
// an eltwise post-op (applied to each output element before it is stored).
dnnl::primitive_attr attributes(Activation act) {
  dnnl::primitive_attr attr = user_scratchpad();
  if (act == Activation::None) return attr;
  dnnl::post_ops ops;
  switch (act) {
    case Activation::Relu: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); break;
    case Activation::Tanh: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f); break;
    case Activation::Sigmoid: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f); break;
    case Activation::GeluErf: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f); break;
    case Activation::GeluTanh: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f); break;
    case Activation::Relu6: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 6.0f); break;
    case Activation::Hardswish: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f); break;
    case Activation::Silu: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f); break;
    case Activation::None: break;
  }
  attr.set_post_ops(ops);
  return attr;
}

// A transposed convolution of stride s > 1 (dilation 1, constant float32 weights) as an ordinary
// convolution and an interleave ("sub-pixel"): output o along a dim, with q = (o + p) / s and
// phase r = (o + p) % s, is sum over m of x[q - m] * w[r + s * m], a correlation of x with a
// kernel of K = ceil(k / s) taps (zero past k) per phase. One convolution computes every phase
// as its own output channel (channel c * phases + phase) into z, [N, O * phases, Q...] (in the
// layout oneDNN chooses for it); the interleave copies each output element from its
// phase's channel at q. oneDNN's own
// deconvolution ran at 13-33 GMAC/s there against 60-70 for its ordinary convolutions (one thread,
// AVX-512, samples/unet's: 64 -> 32 channels 2x2 at 16x16 148 us, 32 -> 16 in two groups 3x3 at
// 32x32 290 us), and its kernels are the larger part of that model's time.
struct SubPixel {
  bool on = false;
  int64_t phases = 1, channels = 0;  // the product of the strides; the output's channels
  dims stride, padding, taps;        // per spatial dim: s, p, K
  dims out_sizes, out_strides;       // the transposed convolution's output, as stored
  dims z_sizes, z_strides;           // [N, channels * phases, Q...]; the strides of its blocks
  std::vector<int64_t> channel_offset;  // of each channel of z within its pixel's block
  std::vector<int64_t> row_at, row_phase;  // per output along the last dim: its z offset and phase there
  std::vector<float> weights;        // [channels * phases, I / G, K...], each group's channels together

  // Whether `spec` is one, and if so its sizes, strides and weights ([I, O / G, k...] as stored).
  bool plan(const ConvSpec& spec, const dims& out_strides_as_stored) {
    const size_t spatial = spec.input_sizes.size() - 2;
    if (!spec.transposed || !spec.constant_weights || spec.data_type != dt::f32 || spatial > 3) return false;
    phases = 1;
    for (size_t d = 0; d < spatial; ++d) {
      if (spec.dilation[d] != 1) return false;
      phases *= spec.stride[d];
    }
    if (phases == 1 || !pays(spec)) return false;
    stride = spec.stride, padding = spec.padding, taps = dims(spatial);
    out_sizes = spec.output_sizes, out_strides = out_strides_as_stored, channels = out_sizes[1];
    z_sizes = {out_sizes[0], channels * phases};
    for (size_t d = 0; d < spatial; ++d) {
      taps[d] = (spec.weight_sizes[d + 2] + stride[d] - 1) / stride[d];
      const int64_t q = (out_sizes[d + 2] - 1 + padding[d]) / stride[d] + 1;  // the z positions read
      z_sizes.push_back(std::max(q, spec.input_sizes[d + 2]));
    }
    arrange_weights(spec);
    return true;
  }

  // Whether it is faster than oneDNN's deconvolution: when each kernel dim is a multiple of its
  // stride (no taps of zeros), or over at most 32 channels a group in or out, where the
  // deconvolution is weakest. Kernels of 3 taps at stride 2 compute 16/9 as many multiply-adds
  // (one thread, AVX-512, NCHW, against the deconvolution: 2x2 256 -> 128 at 28x28 2.27 ms against
  // 3.08, 4x4 128 -> 64 at 32x32 2.13 against 2.73, 4x4 64 -> 3 at 64x64 0.50 against 1.59; 3x3
  // 32 -> 32 at 32x32 0.35 against 0.65, 64 -> 64 1.15 against 1.59 but 1.54 against 1.48 channels
  // last, 128 -> 64 at 28x28 1.56 against 1.50, 512 -> 256 at 14x14 5.48 against 3.85).
  static bool pays(const ConvSpec& spec) {
    bool whole_taps = true;
    for (size_t d = 2; d < spec.weight_sizes.size(); ++d) whole_taps &= spec.weight_sizes[d] % spec.stride[d - 2] == 0;
    const int64_t per_group_in = spec.weight_sizes[0] / spec.groups, per_group_out = spec.weight_sizes[1];
    return whole_taps || std::min(per_group_in, per_group_out) <= 32;
  }

  // z as the convolution stores it (`md`, oneDNN's choice): plain strides, or blocks of channels
  // innermost (nChw16c). Whether it is one of those.
  bool take_layout(const dnnl::memory::desc& md) {
    const auto& blocking = md.data.format_desc.blocking;
    if (md.data.format_kind != dnnl_blocked || blocking.inner_nblks > 1 || (blocking.inner_nblks == 1 && blocking.inner_idxs[0] != 1))
      return false;
    const int64_t block = blocking.inner_nblks == 1 ? blocking.inner_blks[0] : 1;
    z_strides.assign(blocking.strides, blocking.strides + z_sizes.size());
    channel_offset.resize(static_cast<size_t>(channels * phases));
    for (int64_t ch = 0; ch < channels * phases; ++ch) channel_offset[ch] = ch / block * z_strides[1] + ch % block;
    const size_t last = out_sizes.size() - 1;
    row_at.resize(static_cast<size_t>(out_sizes[last]));
    row_phase.resize(row_at.size());
    for (int64_t o = 0; o < out_sizes[last]; ++o) {
      row_at[o] = (o + padding[last - 2]) / stride[last - 2] * z_strides[last];
      row_phase[o] = (o + padding[last - 2]) % stride[last - 2];
    }
    return on = true;
  }

  // Ordinary convolution weights from the transposed ones: tap j of phase r is w[r + s * (K - 1 - j)].
  void arrange_weights(const ConvSpec& spec) {
    const dims& w = spec.weight_sizes;
    const size_t spatial = w.size() - 2;
    const int64_t groups = spec.groups, per_group_out = w[1], per_group_in = w[0] / groups;
    const int64_t window = product(taps, 0);
    weights.assign(static_cast<size_t>(channels * phases * per_group_in * window), 0.0f);
    const float* src = static_cast<const float*>(spec.constant_weights);
    for (int64_t oc = 0; oc < channels * phases; ++oc) {
      const int64_t c = oc / phases, g = c / per_group_out;
      int64_t r[3] = {0, 0, 0};
      for (int64_t d = static_cast<int64_t>(spatial), rest = oc % phases; d-- > 0;) r[d] = rest % stride[d], rest /= stride[d];
      for (int64_t ci = 0; ci < per_group_in; ++ci)
        for (int64_t t = 0; t < window; ++t) {
          int64_t offset = (g * per_group_in + ci) * spec.weight_strides[0] + (c % per_group_out) * spec.weight_strides[1];
          bool inside = true;
          for (int64_t d = static_cast<int64_t>(spatial), rest = t; d-- > 0;) {
            const int64_t j = rest % taps[d], k = r[d] + stride[d] * (taps[d] - 1 - j);
            rest /= taps[d];
            inside &= k < w[d + 2];
            offset += k * spec.weight_strides[d + 2];
          }
          if (inside) weights[static_cast<size_t>((oc * per_group_in + ci) * window + t)] = src[offset];
        }
    }
  }

  // The ordinary convolution's weight dims ((G)OI(D)(H)W) and padding.
  dims weight_dims(const ConvSpec& spec) const {
    dims d = {channels * phases, spec.weight_sizes[0] / spec.groups};
    d.insert(d.end(), taps.begin(), taps.end());
    if (spec.groups > 1) {
      d[0] /= spec.groups;
      d.insert(d.begin(), spec.groups);
    }
    return d;
  }
  void pads(const dims& in, dims& left, dims& right) const {
    left = right = dims(taps.size());
    for (size_t d = 0; d < taps.size(); ++d) left[d] = taps[d] - 1, right[d] = z_sizes[d + 2] - in[d + 2];
  }

  // The bias of every phase: bias[c] at channel c * phases + phase.
  dnnl::memory phase_bias(CallMemory& memory, const float* bias, int64_t bias_stride) const {
    dnnl::memory b = memory.make(strided({channels * phases}, {1}));
    float* to = static_cast<float*>(b.get_data_handle());
    for (int64_t c = 0; c < channels; ++c) std::fill(to + c * phases, to + (c + 1) * phases, bias[c * bias_stride]);
    return b;
  }

  // y[n, c, o...] = z[n, c * phases + phase(o), q(o)...], a row of the last dim at a time.
  void interleave(const float* z, float* y, int team) const {
    const size_t spatial = taps.size(), last = spatial + 1;
    const int64_t width = out_sizes[last], rows = product(out_sizes, 0) / width;
#pragma omp parallel for num_threads(team) if (team > 1) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t rest = row, z_at = 0, y_at = 0, phase = 0, phase_step = stride[spatial - 1];
      for (size_t d = last; d-- > 2;) {  // the row's outer spatial dims, innermost first
        const int64_t o = rest % out_sizes[d];
        rest /= out_sizes[d];
        z_at += (o + padding[d - 2]) / stride[d - 2] * z_strides[d];
        phase += (o + padding[d - 2]) % stride[d - 2] * phase_step;
        phase_step *= stride[d - 2];
        y_at += o * out_strides[d];
      }
      const int64_t c = rest % channels, n = rest / channels;
      z_at += n * z_strides[0];
      y_at += n * out_strides[0] + c * out_strides[1];
      const float* zr = z + z_at;
      const int64_t* channel = channel_offset.data() + c * phases + phase;
      float* yr = y + y_at;
      const int64_t step = out_strides[last];
      for (int64_t o = 0; o < width; ++o) yr[o * step] = zr[row_at[o] + channel[row_phase[o]]];
    }
  }
};

// A convolution over strided NC(D)(H)W input/output and (G)OI(D)(H)W weights, or a transposed
// one over (G)IO(D)(H)W weights (PyTorch's layout: a oneDNN deconvolution, its weights seen
// through strides with the two channel dims swapped; or, where that pays, an ordinary convolution
// and an interleave: SubPixel).
// It runs on activations in the layout oneDNN prefers (channels last for float32 with AVX-512,
// in blocks of 8 or 16 channels elsewhere): for plain NCHW it has only its generic
// matrix-product convolution, 2 to 10 times slower (squeezenet1_1 and small_cnn 1.9x at one
// thread, mobilenet_v3_small's 5x5 depthwise layers more); an input or output stored otherwise
// is reordered on each call, one copy each, which costs far less (and none between two
// convolutions: sched/channels_last.h stores those activations channels last).
struct ConvPrimitive {
  bool ok = false;
  std::string error;  // oneDNN's message when the primitive could not be built
  bool packed_weights = false;
  dnnl::primitive prim;  // a convolution_forward, or a deconvolution_forward when transposed
  dnnl::memory::desc src_md, user_w_md, dst_md, bias_md, w_md, scratchpad_md;
  dnnl::memory::desc conv_src_md, conv_dst_md;  // the layouts the primitive runs on
  dnnl::reorder src_to_conv, conv_to_dst;        // when they differ from src_md / dst_md (retyped)
  Conversion src_in, w_in, bias_in, dst_out;     // 16-bit float operands of a float32 primitive
  dnnl::memory weights;  // reordered constant weights, when packed
  int team = 1;          // threads it is built for and runs on
  int team_cap = 1;      // the model's threads
  double serial_ns = 0;  // the estimate of its time on one thread (call_serial_ns)
  SubPixel sub;          // a transposed convolution run as an ordinary one and an interleave
  std::shared_ptr<Twin<ConvPrimitive, ConvSpec>> twin;  // the call for the other team (twin_for_run)
  bool provisional = false;

  // Shares the twin's packed weights when they are laid out alike (keep_faster_team).
  void share_constants(const ConvPrimitive& from) {
    if (packed_weights && from.packed_weights && w_md == from.w_md) weights = from.weights;
  }

  void build(const ConvSpec& spec) { build_with_f32_fallback(*this, spec); }
  // Zeroed operands for run(): x, w (none when packed), bias (none without), y; their sizes in `bytes`.
  std::vector<ZeroedBytes> zeroed_operands(std::vector<size_t>* bytes) const {
    *bytes = {src_md.get_size(), packed_weights ? 0 : user_w_md.get_size(),
              bias_md.get_size() ? bias_in.from.get_size() : 0, dst_md.get_size()};
    return zeroed(*bytes);
  }

  // Multiply-adds: each output element (each input element, transposed) meets a kernel's window
  // of the weights' second dim.
  static double macs(const ConvSpec& spec) {
    return product(spec.transposed ? spec.input_sizes : spec.output_sizes) * product(spec.weight_sizes, 1);
  }
  static double elements(const ConvSpec& spec) {
    return product(spec.input_sizes) + product(spec.weight_sizes) + product(spec.output_sizes);
  }

  // Builds the primitive computing in `compute` (the operands' type, or float32 for 16-bit floats).
  void build_as(const ConvSpec& spec, mdt compute) {
    serial_ns = call_serial_ns(macs(spec), elements(spec), spec.weight_bytes);
    team_cap = spec.team_cap;
    team = spec.team > 0 ? spec.team : team_for(serial_ns, spec.team_cap, kDnnlTeamNs);
    TeamSize team_size(team);
    const dims &in = spec.input_sizes, &w = spec.weight_sizes, &w_strides = spec.weight_strides,
               &out = spec.output_sizes, &stride = spec.stride, &padding = spec.padding, &dilation = spec.dilation;
    const int64_t groups = spec.groups;
    const mdt type = to_dnnl(spec.data_type);
    const void* weights_data = spec.constant_weights;
    size_t spatial = in.size() - 2;
    dims dil(spatial), pad_r(spatial);
    for (size_t d = 0; d < spatial; ++d) {
      dil[d] = dilation[d] - 1;  // oneDNN counts the gaps
      int64_t span = (w[d + 2] - 1) * dilation[d] + 1;
      // A transposed convolution's output is its input's place: the roles of the two swap. Its
      // right padding is negative by output_padding beyond `padding` (oneDNN takes that).
      const int64_t small = spec.transposed ? out[d + 2] : in[d + 2], large = spec.transposed ? in[d + 2] : out[d + 2];
      pad_r[d] = (large - 1) * stride[d] + span - small - padding[d];
      if (!spec.transposed) pad_r[d] = std::max<int64_t>(0, pad_r[d]);
    }
    src_md = strided(in, spec.input_strides, type);
    dst_md = strided(out, spec.output_strides.empty() ? contiguous(out) : spec.output_strides, type);
    src_in.build(src_md, retyped(src_md, compute));
    dst_out.build(retyped(dst_md, compute), dst_md);
    dims wd = w, ws = w_strides;
    if (spec.transposed) {  // [I, O/G, ...] seen as [O/G, I, ...]
      std::swap(wd[0], wd[1]);
      std::swap(ws[0], ws[1]);
    }
    if (groups > 1) {  // [O, I/G, ...] -> [G, O/G, I/G, ...]; transposed: [O/G, I, ...] -> the same
      const size_t whole = spec.transposed ? 1 : 0;  // the channel dim that holds the groups
      const int64_t per_group = wd[whole] / groups;
      wd[whole] = per_group;
      wd.insert(wd.begin(), groups);
      ws.insert(ws.begin(), ws[whole] * per_group);
    }
    user_w_md = strided(wd, ws, type);
    w_in.build(user_w_md, retyped(user_w_md, compute));
    if (spec.has_bias) bias_in.build(strided({out[1]}, {spec.bias_stride}, type), retyped(strided({out[1]}, {spec.bias_stride}, type), compute));
    bias_md = spec.has_bias ? bias_in.to : dnnl::memory::desc();
    auto any = [&](const dims& d) { return dnnl::memory::desc(d, compute, dnnl::memory::format_tag::any); };
    w_md = weights_data ? any(wd) : w_in.to;
    sub.on = false;
    if (compute == mdt::f32 && sub.plan(spec, spec.output_strides.empty() ? contiguous(out) : spec.output_strides) &&
        build_sub_pixel(spec, any(in)))
      return;
    if (spec.transposed) {
      dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                             any(in), w_md, bias_md, any(out), stride, dil, padding, pad_r);
      dnnl::deconvolution_forward::primitive_desc pd(desc, attributes(spec.activation), engine());
      prim = dnnl::deconvolution_forward(pd);
      finish_build(pd, weights_data);
    } else {
      auto primitive_desc = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                             src, w_md, bias_md, dst, stride, dil, padding, pad_r);
        return dnnl::convolution_forward::primitive_desc(desc, attributes(spec.activation), engine());
      };
      dnnl::convolution_forward::primitive_desc pd;
      if (product_on_operands(spec)) {
        try {
          pd = primitive_desc(src_in.to, dst_out.from);
          // Only the matrix product pays: a reference implementation that takes any strides is
          // far slower than the reorders.
          if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) pd = dnnl::convolution_forward::primitive_desc();
        } catch (const dnnl::error&) {  // no implementation on these strides: the library's layout
        }
      }
      if (!pd) pd = primitive_desc(any(in), any(out));
      prim = dnnl::convolution_forward(pd);
      finish_build(pd, weights_data);
    }
  }

  // Whether a convolution runs on its operands as they are stored instead of in the layout oneDNN
  // prefers (channels last, reordered there and back on every call). A 1x1 convolution without
  // padding is a matrix product on the stored operands, [O, I] x [I, pixels] per image; over at
  // most a few hundred input channels and enough pixels the product costs less than the two
  // reorders (one thread, AVX-512, oneDNN 2.6, against the channels-last call with its reorders:
  // 24 -> 144 channels at 56x56 0.21 ms against 0.49, 256 -> 64 0.89 against 1.39, 256 -> 1024
  // at 14x14 0.97 against 1.46; a longer product is slower there: 1024 -> 256 at 14x14 1.49
  // against 1.05, 2048 -> 512 at 7x7 2.03 against 0.95, and so are 49 pixels: 96 -> 576 at 7x7
  // 0.070 against 0.059). Not with a folded activation, which that implementation applies in a
  // slow pass of its own (24 -> 144 at 56x56 with a relu: 0.49 against 0.50; 16 -> 64 at 56x56
  // 0.19 against 0.11). samples/effnet_block at one thread: 5.16 -> 4.42 ms on that machine.
  static bool product_on_operands(const ConvSpec& spec) {
    return spec.activation == Activation::None &&
           (spec.output_strides.empty() || spec.output_strides == contiguous(spec.output_sizes)) &&
           conv_is_stored_product(spec.input_sizes, spec.input_strides, spec.weight_sizes, spec.padding,
                                  spec.output_sizes, spec.groups, spec.transposed);
  }

  // The ordinary convolution of a sub-pixel one (SubPixel), into z; float32 only. False when
  // oneDNN has only its reference implementation for it, or stores z in a layout the interleave
  // does not read: the deconvolution is built instead.
  bool build_sub_pixel(const ConvSpec& spec, const dnnl::memory::desc& any_src) {
    const dims wd = sub.weight_dims(spec);
    dims pad_l, pad_r;
    sub.pads(spec.input_sizes, pad_l, pad_r);
    const dnnl::memory::desc phase_bias_md = spec.has_bias ? strided({sub.channels * sub.phases}, {1}) : dnnl::memory::desc();
    const dims ones(sub.taps.size(), 1), none(sub.taps.size(), 0);
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                         any_src, dnnl::memory::desc(wd, mdt::f32, dnnl::memory::format_tag::any),
                                         phase_bias_md, dnnl::memory::desc(sub.z_sizes, mdt::f32, dnnl::memory::format_tag::any),
                                         ones, none, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attributes(spec.activation), engine());
    // Checked before any member changes: the deconvolution built instead reads them as they are.
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0 || !sub.take_layout(pd.dst_desc())) {
      sub.weights = {};
      return false;
    }
    user_w_md = strided(wd, contiguous(wd));
    w_in.build(user_w_md, user_w_md);
    bias_md = phase_bias_md;
    prim = dnnl::convolution_forward(pd);
    finish_operands(pd, sub.weights.data());
    conv_dst_md = pd.dst_desc();
    sub.weights = {};  // packed into `weights`
    return true;
  }

  // The layouts the primitive `pd` describes runs on, their reorders, and the constant weights
  // reordered into its layout.
  template <typename PrimitiveDesc>
  void finish_build(const PrimitiveDesc& pd, const void* weights_data) {
    finish_operands(pd, weights_data);
    conv_dst_md = pd.dst_desc();
    if (conv_dst_md != dst_out.from) conv_to_dst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), conv_dst_md, engine(), dst_out.from));
  }
  template <typename PrimitiveDesc>
  void finish_operands(const PrimitiveDesc& pd, const void* weights_data) {
    scratchpad_md = pd.scratchpad_desc();
    conv_src_md = pd.src_desc();
    if (conv_src_md != src_in.to) src_to_conv = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src_in.to, engine(), conv_src_md));
    packed_weights = weights_data != nullptr;
    if (weights_data) {
      weights = dnnl::memory(pd.weights_desc(), engine());
      dnnl::stream s(engine());
      dnnl::memory user = w_in.in(wrap(user_w_md, weights_data));
      dnnl::reorder(user, weights).execute(s, user, weights);
      s.wait();
    }
    w_md = pd.weights_desc();
  }

  void run(const void* x, const void* w, const void* bias, void* y) const {
    if (const ConvPrimitive& other = twin_for_run(*this); &other != this) return other.run(x, w, bias, y);
    watch_team_step(team, serial_ns);
    TeamSize team_size(team);
    CallMemory& memory = CallMemory::start(this);
    dnnl::memory src = src_in.in(memory.view(src_md, x), &memory), dst = memory.view(dst_md, y);
    dnnl::memory computed = dst_out.needed ? memory.make(dst_out.from) : dst;
    dnnl::memory conv_src = src_to_conv ? memory.make(conv_src_md) : src;
    dnnl::memory conv_dst = conv_to_dst || sub.on ? memory.make(conv_dst_md) : computed;
    if (src_to_conv) Args().add(DNNL_ARG_FROM, src).add(DNNL_ARG_TO, conv_src).execute(src_to_conv);
    dnnl::memory bias_memory;
    if (bias && sub.on)
      bias_memory = sub.phase_bias(memory, static_cast<const float*>(bias), bias_in.from.data.format_desc.blocking.strides[0]);
    else if (bias)
      bias_memory = bias_in.in(memory.view(bias_in.from, bias), &memory);
    Args()
        .add(DNNL_ARG_SRC, conv_src)
        .add(DNNL_ARG_WEIGHTS, packed_weights ? weights : w_in.in(memory.view(user_w_md, w), &memory))
        .add(DNNL_ARG_BIAS, bias_memory)
        .add(DNNL_ARG_DST, conv_dst)
        .add(DNNL_ARG_SCRATCHPAD, memory.make(scratchpad_md))
        .execute(prim);
    if (sub.on)
      sub.interleave(static_cast<const float*>(conv_dst.get_data_handle()), static_cast<float*>(computed.get_data_handle()), team);
    if (conv_to_dst) Args().add(DNNL_ARG_FROM, conv_dst).add(DNNL_ARG_TO, computed).execute(conv_to_dst);
    if (dst_out.needed) convert(computed, dst);
  }
};

// out[b] = a[b] @ w[b] (+ bias broadcast to [M, N]), all operands strided, output contiguous.
// A matrix product (optionally with a broadcast bias). The row count of the input and output may
// be DNNL_RUNTIME_DIM_VAL (a dynamic batch): it is then given to run(), and oneDNN's kernel for
// runtime dimensions is chosen once, at creation.
struct MatmulPrimitive {
  bool ok = false;
  std::string error;  // oneDNN's message when the primitive could not be built
  dnnl::matmul prim;
  // With a dynamic row count and a team of more than one: the primitive built for one thread, run
  // when the rows are too few for the team (a primitive runs on the team it was built for).
  dnnl::matmul prim_one;
  dnnl::memory::desc a_md, b_md, bias_md, dst_md, scratchpad_md, scratchpad_one_md;
  dims a_dims, a_strides, dst_dims, dst_strides;
  mdt compute = mdt::f32;  // the primitive's type: the operands', or float32 for 16-bit floats
  // 16-bit float operands of a float32 primitive; a and the output per run with a dynamic row count
  Conversion a_in, b_in, bias_in, dst_out;
  dnnl::memory converted_b;  // constant b converted at creation, when b_in is needed
  int team_cap = 1;
  int team = 1;  // threads it is built for and runs on; with a dynamic row count decided per run
  double b_elements = 0;
  double weight_bytes = 0;  // the model's (call_team)
  double serial_ns = 0;     // the estimate of its time on one thread; 0 with a dynamic row count
  std::shared_ptr<Twin<MatmulPrimitive, MatmulSpec>> twin;  // the call for the other team (twin_for_run)
  bool provisional = false;

  // Shares the twin's converted constant b when it is laid out alike (keep_faster_team).
  void share_constants(const MatmulPrimitive& from) {
    if (converted_b && from.converted_b && b_in.to == from.b_in.to) converted_b = from.converted_b;
  }

  void build(const MatmulSpec& spec) { build_with_f32_fallback(*this, spec); }
  // Zeroed operands for run(): a, b, bias (none without), y; their sizes in `bytes`.
  std::vector<ZeroedBytes> zeroed_operands(std::vector<size_t>* bytes) const {
    *bytes = {a_md.get_size(), b_md.get_size(), bias_md.get_size(), dst_md.get_size()};
    return zeroed(*bytes);
  }

  // Multiply-adds for `rows` rows: every output element sums over K.
  double macs(int64_t rows) const {
    dims out = dst_dims;
    if (out[0] == DNNL_RUNTIME_DIM_VAL) out[0] = rows;
    return product(out) * static_cast<double>(a_dims.back());
  }
  // The team for `rows` rows, from their multiply-adds and the elements of a, b and the output.
  int team_for_rows(int64_t rows) const {
    dims a = a_dims, out = dst_dims;
    if (a[0] == DNNL_RUNTIME_DIM_VAL) a[0] = out[0] = rows;
    return call_team(macs(rows), product(a) + b_elements + product(out), weight_bytes, team_cap);
  }

  void build_as(const MatmulSpec& spec, mdt compute_as) {
    const mdt type = to_dnnl(spec.data_type);
    compute = compute_as;
    a_dims = spec.a_sizes;
    a_strides = spec.a_strides;
    dst_dims = spec.output_sizes;
    dst_strides = contiguous(dst_dims);
    a_md = strided(a_dims, a_strides, type);
    b_md = strided(spec.b_sizes, spec.b_strides, type);
    dst_md = strided(dst_dims, dst_strides, type);
    team_cap = spec.team_cap;
    b_elements = product(spec.b_sizes);
    weight_bytes = spec.weight_bytes;
    const bool dynamic_rows = a_dims[0] == DNNL_RUNTIME_DIM_VAL;
    serial_ns = dynamic_rows ? 0 : call_serial_ns(macs(0), product(a_dims) + b_elements + product(dst_dims), weight_bytes);
    team = dynamic_rows ? team_cap : spec.team > 0 ? spec.team : team_for(serial_ns, team_cap, kDnnlTeamNs);
    bias_md = spec.has_bias ? strided(spec.bias_sizes, spec.bias_strides, type) : dnnl::memory::desc();
    a_in.build(a_md, retyped(a_md, compute));
    dst_out.build(retyped(dst_md, compute), dst_md);
    b_in.build(b_md, retyped(b_md, compute));
    if (spec.has_bias) bias_in.build(bias_md, retyped(bias_md, compute));
    dnnl::matmul::desc desc(strided(a_dims, a_strides, compute), b_in.to, spec.has_bias ? bias_in.to : bias_md,
                            strided(dst_dims, dst_strides, compute));
    auto built_for = [&](int threads, dnnl::memory::desc& scratchpad) {
      TeamSize team_size(threads);
      dnnl::matmul::primitive_desc pd(desc, attributes(spec.activation), engine());
      scratchpad = pd.scratchpad_desc();
      return dnnl::matmul(pd);
    };
    prim = built_for(team, scratchpad_md);
    if (dynamic_rows && team > 1) prim_one = built_for(1, scratchpad_one_md);
    if (spec.constant_b && b_in.needed) converted_b = b_in.in(wrap(b_md, spec.constant_b));
  }

  // `rows`: the actual row count where it was built as DNNL_RUNTIME_DIM_VAL (ignored otherwise).
  void run(const void* a, const void* b, const void* bias, void* y, int64_t rows = 0) const {
    if (const MatmulPrimitive& other = twin_for_run(*this); &other != this) return other.run(a, b, bias, y, rows);
    const bool dynamic_rows = a_dims[0] == DNNL_RUNTIME_DIM_VAL;
    const int threads = dynamic_rows ? team_for_rows(rows) : team;
    if (!dynamic_rows) watch_team_step(team, serial_ns);
    const bool one = threads == 1 && prim_one;
    TeamSize team_size(one ? 1 : team);
    CallMemory& memory = CallMemory::start(this);
    if (!dynamic_rows) return execute(memory, a_in, dst_out, a, b, bias, y, prim, scratchpad_md);
    dims a_actual = a_dims, dst_actual = dst_dims;
    a_actual[0] = dst_actual[0] = rows;
    const dnnl::memory::desc a_run = strided(a_actual, a_strides, a_md.data_type());
    const dnnl::memory::desc dst_run = strided(dst_actual, dst_strides, dst_md.data_type());
    Conversion a_rows, dst_rows;
    a_rows.build(a_run, retyped(a_run, compute));
    dst_rows.build(retyped(dst_run, compute), dst_run);
    execute(memory, a_rows, dst_rows, a, b, bias, y, one ? prim_one : prim, one ? scratchpad_one_md : scratchpad_md);
  }

 private:
  void execute(CallMemory& memory, const Conversion& a_conv, const Conversion& dst_conv, const void* a, const void* b,
               const void* bias, void* y, const dnnl::matmul& p, const dnnl::memory::desc& scratchpad) const {
    dnnl::memory dst = memory.view(dst_conv.to, y);
    dnnl::memory computed = dst_conv.needed ? memory.make(dst_conv.from) : dst;
    Args()
        .add(DNNL_ARG_SRC, a_conv.in(memory.view(a_conv.from, a), &memory))
        .add(DNNL_ARG_WEIGHTS, converted_b ? converted_b : b_in.in(memory.view(b_md, b), &memory))
        .add(DNNL_ARG_BIAS, bias ? bias_in.in(memory.view(bias_md, bias), &memory) : dnnl::memory())
        .add(DNNL_ARG_DST, computed)
        .add(DNNL_ARG_SCRATCHPAD, memory.make(scratchpad))
        .execute(p);
    if (dst_conv.needed) convert(computed, dst);
  }
};

// The nanoseconds of one run of `p` on `operands` (zeroed_operands(), with their byte counts), as
// a run of the model meets it: the calling thread has just written the inputs (the step before
// wrote them), and the time includes the calling thread reading the output back (the step after
// reads it). Without that, a team's threads find their parts of the operands in their own caches
// from the previous timed run, which a model's run never offers them.
template <typename Primitive>
double run_ns(const Primitive& p, const std::vector<ZeroedBytes>& operands, const std::vector<size_t>& bytes) {
  for (size_t k = 0; k + 1 < operands.size(); ++k)
    if (operands[k].get()) std::memset(operands[k].get(), 0, bytes[k]);
  const auto start = std::chrono::steady_clock::now();
  p.run(operands[0].get(), operands[1].get(), operands[2].get(), operands[3].get());
  const unsigned char* out = static_cast<const unsigned char*>(operands[3].get());
  unsigned sum = 0;
  for (size_t i = 0; i < bytes[3]; i += 64) sum += out[i];
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  __asm__ __volatile__("" ::"r"(sum));
  return ns;
}

// `built`, or the same call built for the other team when that one is faster: decided by timing
// both, five runs each in turn on zeroed operands (the median of each: what most runs of the model
// will meet, lucky or unlucky runs aside), when the estimate is a close call. A call with a dynamic
// row count (serial_ns 0) keeps its choice per run.
template <typename Primitive, typename Spec>
void keep_faster_team(Primitive& built, Spec spec, const char* model, const char* call) {
  if (built.serial_ns <= 0 || !close_call(built.serial_ns, spec.team_cap)) {
    if (log_teams() && built.serial_ns > 0)
      std::fprintf(stderr, "%s: %s runs on %d thread(s) by its estimate (%.1f us on one)\n", model, call, built.team,
                   built.serial_ns / 1e3);
    // (A payback of 0 keeps every step on the team, this call's too.)
    if (built.serial_ns > 0 && built.team > 1 && region_payback() > 0)
      built.twin = std::make_shared<Twin<Primitive, Spec>>(spec, model, call);
    return;
  }
  spec.team = built.team > 1 ? 1 : spec.team_cap;
  Primitive other;
  other.build(spec);
  if (!other.ok) return;
  try {
    std::vector<size_t> bytes;
    const std::vector<ZeroedBytes> operands = built.zeroed_operands(&bytes);
    double mine = 1e300, theirs = 1e300;
    auto time_both = [&] {
      parallel_region_ns(spec.team_cap, /*fresh=*/true);  // the pool as the timed runs find it, settled
      double mine_runs[5], their_runs[5];
      for (int k = 0; k < 5; ++k) {
        mine_runs[k] = run_ns(built, operands, bytes);
        their_runs[k] = run_ns(other, operands, bytes);
      }
      std::sort(mine_runs, mine_runs + 5);
      std::sort(their_runs, their_runs + 5);
      mine = std::min(mine, mine_runs[2]);
      theirs = std::min(theirs, their_runs[2]);
    };
    time_both();
    // A team more than twice as slow as one thread met a pool that was not all there (on the
    // 16-core host, a virtual machine, a convolution of 68-86 us on the team took 1139 us in one
    // process of 8, and ran on one thread for its life): once more, the faster median kept.
    if ((built.team > 1 ? mine : theirs) > 2 * (built.team > 1 ? theirs : mine)) time_both();
    // The team must save what any step must to take it: region_payback() parallel regions. Being
    // faster alone is not enough: after it the pool's threads spin on every core, and the model's
    // one-thread steps run meanwhile at the clock of a busy chip (encoder_layer on the 16-core
    // Xeon: its bmm kept the team for 9.9 us against 10.8 on one thread, and the whole run took
    // 94 us against 69 with every step on one thread). That is the cost of regions on idle cores:
    // the team's timed runs already paid what the regions cost now.
    const double team_ns = built.team > 1 ? mine : theirs, one_ns = built.team > 1 ? theirs : mine;
    const double region_ns = parallel_region_ns(spec.team_cap);
    const double must_save = region_payback() * std::min(region_ns, kSlowRegionNs);
    const bool switch_team = (built.team > 1) != (one_ns - team_ns >= must_save);
    if (log_teams())
      std::fprintf(stderr,
                   "%s: %s timed at creation: %d thread(s) %.1f us, %d %.1f us (estimate %.1f us on one, a team "
                   "must save %.1f us): runs on %d\n",
                   model, call, built.team, mine / 1e3, other.team, theirs / 1e3, built.serial_ns / 1e3, must_save / 1e3,
                   switch_team ? other.team : built.team);
    // The twin is kept where a run may take it: a team's one-thread twin (for slow spells), or
    // either for a choice made in a slow spell (provisional). A one-thread choice made while the
    // regions were fast runs on one thread whatever they do later.
    const bool provisional = region_ns > kSlowRegionNs;
    const bool keep = provisional || (switch_team ? other.team : built.team) > 1;
    Primitive kept = std::move(switch_team ? built : other);
    if (switch_team) built = std::move(other);
    built.twin = nullptr;
    if (keep) {  // the other call goes otherwise: nothing of it to share
      kept.share_constants(built);
      built.twin = std::make_shared<Twin<Primitive, Spec>>(std::move(kept));
    }
    built.provisional = provisional;
  } catch (const std::exception&) {
    // A run that fails here fails again in the model's runs, which fall back and say why.
  }
}

// FOUNDRY_NO_DNNL=1: every call runs on the portable loops (to rule oneDNN out, or to test them).
bool dnnl_disabled() {
  const char* disabled = std::getenv("FOUNDRY_NO_DNNL");
  return disabled && std::string(disabled) == "1";
}

void say_disabled(const char* model, const char* call) {
  std::fprintf(stderr, "%s: warning: %s runs on the portable loops: FOUNDRY_NO_DNNL=1 is set\n", model, call);
}

// The primitive of one library call built at model creation (foundry_dnnl.h: build), timed for
// its team where that is a close call; null when the call runs on the portable loops.
template <typename Primitive, typename Spec>
std::shared_ptr<Primitive> build_primitive(const Spec& spec, const char* model, const char* call) {
  if (dnnl_disabled()) {
    say_disabled(model, call);
    return nullptr;
  }
  auto primitive = std::make_shared<Primitive>();
  {
    LastingChoice lasting;  // the primitive is built for its team once
    primitive->build(spec);
  }
  if (!primitive->ok)
    std::fprintf(stderr, "%s: warning: %s runs on the portable loops: oneDNN could not build it: %s\n", model, call,
                 primitive->error.c_str());
  else
    keep_faster_team(*primitive, spec, model, call);
  forget_team_step();  // the timed runs' teams
  return primitive;
}

// Runs `run`, oneDNN's failures turned into the LibraryError a generated call catches.
template <typename Run>
void reporting_failures(const Run& run) {
  try {
    run();
  } catch (const dnnl::error& e) {
    throw LibraryError(e.what());
  }
}

template <typename Primitive>
bool Built<Primitive>::ok() const {
  return p_ && p_->ok;
}
template <typename Primitive>
const std::string& Built<Primitive>::error() const {
  static const std::string none;
  return p_ ? p_->error : none;
}
template class Built<ConvPrimitive>;
template class Built<MatmulPrimitive>;

void build(Conv& call, const ConvSpec& spec, const char* model, const char* label) {
  call = Conv(build_primitive<ConvPrimitive>(spec, model, label));
}
void build(Matmul& call, const MatmulSpec& spec, const char* model, const char* label) {
  call = Matmul(build_primitive<MatmulPrimitive>(spec, model, label));
}

void Conv::run(const void* x, const void* w, const void* bias, void* y) const {
  reporting_failures([&] { p_->run(x, w, bias, y); });
}
void Matmul::run(const void* a, const void* b, const void* bias, void* y, int64_t rows) const {
  reporting_failures([&] { p_->run(a, b, bias, y, rows); });
}

// --- Primitives for dynamic shapes: built per shape on first use --------------------------------

// Every size and stride a spec describes, as the key of its primitive.
std::vector<int64_t> shape_key(const ConvSpec& s) {
  std::vector<int64_t> k;
  for (const dims* d : {&s.input_sizes, &s.input_strides, &s.weight_sizes, &s.weight_strides, &s.output_sizes, &s.output_strides})
    k.insert(k.end(), d->begin(), d->end());
  return k;
}
std::vector<int64_t> shape_key(const MatmulSpec& s) {
  std::vector<int64_t> k;
  for (const dims* d : {&s.a_sizes, &s.a_strides, &s.b_sizes, &s.b_strides, &s.output_sizes, &s.bias_sizes, &s.bias_strides})
    k.insert(k.end(), d->begin(), d->end());
  return k;
}

template <typename Call, typename Spec>
std::shared_ptr<const Call> PerShape<Call, Spec>::get(const Spec& spec, const char* model, const char* call) const {
  std::vector<int64_t> key = shape_key(spec);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = built_.find(key);
  if (it != built_.end()) return it->second;
  if (built_.size() >= kMaxShapes) built_.clear();
  std::shared_ptr<Call> built;
  if (dnnl_disabled()) {
    if (!warned_) say_disabled(model, call);
    warned_ = true;
  } else {
    auto primitive = std::make_shared<typename Call::primitive_type>();
    primitive->build(spec);  // not timed for its team as build() does: this runs inside a run
    built = std::make_shared<Call>(std::move(primitive));
    if (!built->ok()) {
      if (!warned_)
        std::fprintf(stderr, "%s: warning: %s runs on the portable loops for some shapes: oneDNN could not build it: %s\n",
                     model, call, built->error().c_str());
      warned_ = true;
      built = nullptr;
    }
  }
  built_[key] = built;
  return built;
}

template class PerShape<Conv, ConvSpec>;
template class PerShape<Matmul, MatmulSpec>;

}  // namespace dnnl_glue
}  // namespace foundry_rt
