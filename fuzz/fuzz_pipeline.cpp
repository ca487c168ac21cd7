// libFuzzer target: the whole compiler short of the C++ compiler, on hostile bytes (a .pt2 archive
// or a bare model.json, see fuzz_common.h): load, verify, the supported-op check, the graph
// passes, lowering, scheduling (with fusion) and code generation, plus the debug dumps each stage
// can write; one input in 16 is also compiled with g++ and run under AddressSanitizer
// (compile_and_run.h). Build with -DFOUNDRY_FUZZ=ON (clang); run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "foundry/codegen/wrapper.h"
#include "foundry/ir/print.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/pipeline.h"
#include "foundry/sched/schedule.h"
#include "compile_and_run.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  foundry_fuzz::run_one([&] {
    foundry::Graph g = foundry_fuzz::load_bytes(data, size);
    foundry::verify_graph(g);
    foundry::check_supported_ops(g);
    foundry::PassOptions pass_options;
    pass_options.verify = true;  // a pass that breaks the graph is an InternalError: a finding
    foundry::run_graph_passes(g, pass_options);
    (void)foundry::print_graph(g);
    foundry::ir::LoopProgram program = foundry::lower::lower_graph(g);
    (void)foundry::ir::print_program(program);
    foundry::sched::ScheduleOptions options;
    foundry::sched::Schedule schedule = foundry::sched::schedule_program(program, options);
    (void)foundry::sched::print_schedule(schedule);
    foundry::codegen::GeneratedModel model = foundry::codegen::generate_model(program, schedule, "fuzz");
    if (foundry_fuzz::chosen_for_compile(data, size))
      foundry_fuzz::compile_and_run(model, foundry_fuzz::fnv1a(data, size));
  });
  return 0;
}
