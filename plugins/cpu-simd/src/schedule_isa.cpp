// The instruction sets: which plain kernels run (by CPUID, capped by
// cpu.isa) and the cap on oneDNN's; keeping oneDNN's runtime resident.
#include <dlfcn.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "schedule.hpp"

namespace loom::cpu_simd {

namespace {

struct IsaName {
  dnnl::cpu_isa isa;
  const char* name;
};
constexpr IsaName kIsaNames[] = {
    {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"},
    {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
    {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
    {dnnl::cpu_isa::avx512_core, "avx512_core"},
    {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},
    {dnnl::cpu_isa::avx2, "avx2"},
    {dnnl::cpu_isa::avx, "avx"},
    {dnnl::cpu_isa::sse41, "sse41"},
    {dnnl::cpu_isa::all, "all"},
};

}  // namespace

Kernels select_kernels(KernelIsa cap) {
  Kernels k;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512 && cap >= KernelIsa::kAvx512) {
    k.isa = KernelIsa::kAvx512;
    k.name = "avx512";
    k.run_node = isa_avx512::run_node;
    k.layer_norm = isa_avx512::layer_norm;
    k.global_average_nhwc = isa_avx512::global_average_nhwc;
    k.quant_add = isa_avx512::quant_add;
    k.lookup_bytes = __builtin_cpu_supports("avx512vbmi") ? isa_avx512::lookup_bytes : isa_avx2::lookup_bytes;
  } else if (avx2 && cap >= KernelIsa::kAvx2) {
    k.isa = KernelIsa::kAvx2;
    k.name = "avx2";
    k.run_node = isa_avx2::run_node;
    k.layer_norm = isa_avx2::layer_norm;
    k.global_average_nhwc = isa_avx2::global_average_nhwc;
    k.quant_add = isa_avx2::quant_add;
    k.lookup_bytes = isa_avx2::lookup_bytes;
  }
  return k;
}

namespace {

// Marks the already loaded library that defines `symbol` NODELETE.
void pin_library_of(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return;
  if (void* h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(h);
}

}  // namespace

void keep_runtime_resident() {
  pin_library_of(reinterpret_cast<const void*>(&dnnl_engine_create));
  pin_library_of(reinterpret_cast<const void*>(&omp_get_max_threads));
}

std::string onednn_isa() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  for (const IsaName& n : kIsaNames) {
    if (n.isa == isa) return n.name;
  }
  return "isa " + std::to_string(static_cast<int>(isa));
}

sdk::Status limit_isa(const std::string& name, KernelIsa* kernels) {
  const std::string want = name == "baseline" ? "sse41" : name;
  for (const IsaName& n : kIsaNames) {
    if (want != n.name) continue;
    *kernels = want == "all" || want.rfind("avx512", 0) == 0 ? KernelIsa::kAvx512
               : want.rfind("avx2", 0) == 0                  ? KernelIsa::kAvx2
                                                             : KernelIsa::kBaseline;
    if (dnnl::set_max_cpu_isa(n.isa) == dnnl::status::success) return sdk::Status();
    if (dnnl::get_effective_cpu_isa() == n.isa) return sdk::Status();
    return sdk::failed_precondition(
        "option cpu.isa=" + name + ": oneDNN in this process already runs at " + onednn_isa() +
        "; the instruction set can be chosen only before the first cpu-simd kernel is made "
        "(set cpu.isa on the first cpu-simd plugin of the process, or ONEDNN_MAX_CPU_ISA in "
        "its environment)");
  }
  return sdk::invalid_argument("option cpu.isa=\"" + name +
                               "\" is not one of avx512_core, avx2, avx, sse41, baseline, all");
}

}  // namespace loom::cpu_simd
