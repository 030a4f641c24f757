"""Planning passes: the decisions code generation makes about a kernel before it emits any
LLVM IR, each a plain function of the IR kernel, the target, the array facts and the launch
block, each returning a frozen record (docs/codegen.md, Plans). kernel_plan.plan_kernel runs
them in order; plan.dump prints the result (`tilec --emit plan`).

This package imports ir/, sema/ types, layouts/, targets, the codegen api and occupancy
tables, never lower/ or the emitter: a plan is data, and the lowerings read it."""
