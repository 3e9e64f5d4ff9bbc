// Real 3-D lines, their flags as their suites write them:
//  - rocmlir-gen, ROCm/rocmlirTriton@007796f2 mlir/test/rocmlir-gen/allclose-operation-keff.mlir
//    (forward and backward-weight, 4^3 input, 3^3 filter) and
//    mlir/test/rocmlir-gen/conv-bwd-data.mlir (BWD_DATA_3D, padding 1); digit 2 is the depth;
//  - MIOpenDriver, ROCm/MIOpen's regression test of issue 2047 (a 2x1x2 input, depth 2).
// RUN: %convgen -operation conv -fil_layout=gkc012 -in_layout=ngc012 -out_layout=ngk012 -batchsize=2 -groupsize=1 -in_channels=4 -out_channels=4 -in_d=4 -in_h=4 -in_w=4 -fil_d=3 -fil_h=3 -fil_w=3 --conv_stride_d=1 --conv_stride_h=1 --conv_stride_w=1 --dilation_d=1 --dilation_h=1 --dilation_w=1 --padding_d=0 --padding_h=0 --padding_w=0 -t f32 %pv %random_data %xdlops | FileCheck %s
// RUN: %convgen -operation conv_bwd_weight -fil_layout=gkc012 -in_layout=ngc012 -out_layout=ngk012 -batchsize=2 -groupsize=1 -in_channels=4 -out_channels=4 -in_d=4 -in_h=4 -in_w=4 -fil_d=3 -fil_h=3 -fil_w=3 --conv_stride_d=1 --conv_stride_h=1 --conv_stride_w=1 --dilation_d=1 --dilation_h=1 --dilation_w=1 --padding_d=0 --padding_h=0 --padding_w=0 -t f32 %pv %random_data %xdlops | FileCheck %s
// RUN: %convgen -operation conv_bwd_data -fil_layout=gkc012 -in_layout=ngc012 -out_layout=ngk012 -batchsize=2 -groupsize=1 -in_channels=4 -out_channels=4 -in_d=4 -in_h=4 -in_w=4 -fil_d=3 -fil_h=3 -fil_w=3 --conv_stride_d=1 --conv_stride_h=1 --conv_stride_w=1 --dilation_d=1 --dilation_h=1 --dilation_w=1 --padding_d=1 --padding_h=1 --padding_w=1 -t f32 %pv %random_data %xdlops | FileCheck %s
// RUN: %convgen conv -n 1 -c 1 --in_d 2 -H 1 -W 2 -k 2 --fil_d 2 -y 1 -x 2 --pad_d 0 -p 0 -q 0 --conv_stride_d 1 -u 1 -v 1 --dilation_d 1 -l 1 -j 1 --spatial_dim 3 -m conv -g 1 -F 1 -i 1 -t 1 -w 1 %pv %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
