// RUN: %convgen conv -n 2 -c 4 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 4 | FileCheck %s
// CHECK: [1 1 1]
