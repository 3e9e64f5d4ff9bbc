// Self-test of the harness: a matching bits line passes, and `not FileCheck`
// on a mismatch passes too.
// RUN: echo "[1 1 1]" | FileCheck %s
// RUN: echo "[1 0 1]" | not FileCheck %s
// CHECK: [1 1 1]
