// rocMLIR e2e test conv_regression_fwd, 2 of 61: -p -rand_side filter
// Source: ROCm/rocmlirTriton@0835cac0e6ba:mlir/test/e2e/conv_regression_fwd.toml. Written by scripts/import-tests (toml); must print [1 1 1].
// REQUIRES: gpu, nightly
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -t f32 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=kcyx -in_layout=nchw -out_layout=nkhw -t f16 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -t f32 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -t f16 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=yxck -in_layout=nhwc -out_layout=nhwk -t f32 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=yxck -in_layout=nhwc -out_layout=nhwk -t f16 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=kc012 -in_layout=nc012 -out_layout=nk012 -t f32 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// RUN: %convgen -p -rand_side filter --operation conv -fil_layout=kc012 -in_layout=nc012 -out_layout=nk012 -t f16 -rand_type float -relDiff_threshold 0.00001 -arch %arch %pv %random_data %rocmlir_gen_flags | FileCheck %s
// CHECK: [1 1 1]
