// rocmlir-gen spellings: one or two dashes, = or a space; -arch and -num_cu are accepted and ignored.
// RUN: %convgen -operation=conv2d -t=f16 --fil_layout kyxc --in_layout nhwc -out_layout=nhwk -batchsize 2 --in_channels=8 -out_channels 8 -in_h=9 --in_w 9 -fil_h=3 -fil_w 3 -padding_h=1 --padding_w 1 -conv_stride_h=1 --conv_stride_w=1 -p=false -pv -rand 1 -x2 --arch gfx90a --num_cu 110 | FileCheck %s
// CHECK: [1 1 1]
