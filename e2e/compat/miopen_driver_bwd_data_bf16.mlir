// RUN: %convgen convbfp16 -n 2 -c 8 -H 10 -W 10 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2 | FileCheck %s
// CHECK: [1 1 1]
