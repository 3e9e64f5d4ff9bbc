// Hardware that keeps fp16 subnormal inputs in its matrix instructions (NVIDIA, MI100,
// gfx94x, the interpreter) matches the plain reference. MI200 flushes them: there this test
// is UNSUPPORTED and f16_subnormal_inputs_flushed_by_hardware.mlir runs instead.
// UNSUPPORTED: subnormal-flush
// RUN: %convgen --operation conv2d -t f16 -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -batchsize=2 -in_channels=8 -out_channels=4 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3 -rand 5 -rand_side input -rand_min 0 -rand_max 1e-4 %pv -x2 | FileCheck %s
// CHECK: [1 1 1]
