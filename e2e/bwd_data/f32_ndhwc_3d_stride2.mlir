// 3-D backward data, channels innermost (MIOpenDriver NDHWC), stride 2 in every dimension:
// input depths that no output depth reaches through a tap are zero.
// RUN: %convgen conv -_ 3 -n 2 -c 5 -! 7 -H 6 -W 5 -k 3 -@ 3 -y 2 -x 3 -$ 1 -p 0 -q 1 -# 2 -u 2 -v 2 -^ 1 -l 1 -j 1 -g 1 -F 2 -I NDHWC -f NDHWC -O NDHWC %random_data %xdlops | FileCheck %s
// CHECK: [1 1 1]
