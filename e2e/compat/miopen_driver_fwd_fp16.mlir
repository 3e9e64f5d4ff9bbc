// RUN: %convgen convfp16 -n 2 -c 8 -H 9 -W 9 -k 16 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 -F 1 -t 1 -V 1 -I NHWC -f NHWC -O NHWC | FileCheck %s
// CHECK: [1 1 1]
