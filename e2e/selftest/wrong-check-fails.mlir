// Self-test of the harness: a bits line that does not match its CHECK must
// make the test fail. If FileCheck were never run (or its exit status lost),
// this test would pass unexpectedly (XPASS), which lit counts as a failure.
// XFAIL: *
// RUN: echo "[1 0 1]" | FileCheck %s
// CHECK: [1 1 1]
