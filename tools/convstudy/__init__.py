"""convstudy: the FP16 study on top of the convgen suite (`convgen study`, `convgen
study-report`): each of its cases is a convgen run; convgen never imports this package."""
