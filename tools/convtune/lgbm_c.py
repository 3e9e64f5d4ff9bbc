"""A trained LightGBM model's predictions through LightGBM's own C API (ctypes), without
importing the lightgbm Python package.

The package imports scipy, and scikit-learn and pandas where they are installed: 0.23 s
on the 2-core CI machine, 2.5 s on the H100's host, against the 0.2 s a run may spend
loading the selector (docs/config-selection.md). Its shared library (lib_lightgbm), the
same code that `Booster.predict` calls, loads in milliseconds. Training still goes through
the package (selector.train).

    Booster(model_text)         a model from LightGBM's text format
    Booster.predict(rows)       raw scores of a float64 (rows x features) array
    Booster.predict_one(row)    the raw score of one row, through the single-row fast path
    available()                 whether the library can be found (lightgbm installed)
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import platform

_DTYPE_FLOAT64 = 1      # C_API_DTYPE_FLOAT64 (c_api.h)
_PREDICT_NORMAL = 0     # C_API_PREDICT_NORMAL: the raw sum of the trees for a regression
_LIB = None


class LightGBMError(Exception):
    """The library refused a call (a model that does not parse, say)."""


def _library_path() -> str | None:
    """Where the installed lightgbm package keeps its library (as lightgbm/libpath.py
    looks for it), found without importing the package."""
    spec = importlib.util.find_spec("lightgbm")
    if spec is None or not spec.submodule_search_locations:
        return None
    name = {"Windows": "lib_lightgbm.dll", "Darwin": "lib_lightgbm.dylib"}.get(platform.system(),
                                                                             "lib_lightgbm.so")
    for folder in spec.submodule_search_locations:
        for sub in ("lib", "bin", os.pardir):
            path = os.path.join(folder, sub, name)
            if os.path.isfile(path):
                return path
    return None


def available() -> bool:
    return _library_path() is not None


def _lib():
    global _LIB
    if _LIB is None:
        path = _library_path()
        if path is None:
            raise ImportError("lightgbm")
        lib = ctypes.cdll.LoadLibrary(path)
        lib.LGBM_GetLastError.restype = ctypes.c_char_p
        _LIB = lib
    return _LIB


def _check(status: int) -> None:
    if status != 0:
        raise LightGBMError(_lib().LGBM_GetLastError().decode(errors="replace"))


class Booster:
    """A model loaded by the library from LightGBM's text format."""

    def __init__(self, model_text: str):
        lib = _lib()
        self._handle = ctypes.c_void_p()
        iterations = ctypes.c_int()
        _check(lib.LGBM_BoosterLoadModelFromString(model_text.encode(), ctypes.byref(iterations),
                                                   ctypes.byref(self._handle)))
        features = ctypes.c_int()
        _check(lib.LGBM_BoosterGetNumFeature(self._handle, ctypes.byref(features)))
        self.num_features = features.value
        self._fast = None
        self._fast_stale = False

    def __del__(self):
        if _LIB is None:
            return
        if getattr(self, "_fast", None):
            _LIB.LGBM_FastConfigFree(self._fast)
            self._fast = None
        if getattr(self, "_handle", None):
            _LIB.LGBM_BoosterFree(self._handle)
            self._handle = None

    def predict_one(self, row) -> float:
        """predict() of one row of all the trees. LightGBM's fast path keeps the parsed
        parameters and the predictor between calls: about 25 us a call where predict()
        takes 60 for the speed model's 75 trees on the 2-core CPU machine, most of it
        building both again. It is all the trees or nothing: the library's predictor reads
        which trees to walk from the model, where predict() of some of them leaves its
        range (a later call would walk predict()'s trees), so after such a call it is built
        again."""
        import numpy as np
        lib = _lib()
        if self._fast is None or self._fast_stale:
            if self._fast is not None:
                lib.LGBM_FastConfigFree(self._fast)
                self._fast = None
            fast = ctypes.c_void_p()
            _check(lib.LGBM_BoosterPredictForMatSingleRowFastInit(
                self._handle, ctypes.c_int(_PREDICT_NORMAL), ctypes.c_int(0), ctypes.c_int(-1),
                ctypes.c_int(_DTYPE_FLOAT64), ctypes.c_int32(self.num_features), b"num_threads=1",
                ctypes.byref(fast)))
            self._fast, self._fast_stale = fast, False
        x = np.ascontiguousarray(row, dtype=np.float64).reshape(-1)
        if x.shape[0] != self.num_features:
            raise ValueError(f"a row of {self.num_features} features expected, got {x.shape[0]}")
        out = ctypes.c_double()
        length = ctypes.c_int64()
        _check(lib.LGBM_BoosterPredictForMatSingleRowFast(
            self._fast, x.ctypes.data_as(ctypes.c_void_p), ctypes.byref(length), ctypes.byref(out)))
        return out.value

    def predict(self, rows, trees: int = -1, start: int = 0):
        """The raw score of each row of a (rows x features) float64 array: what
        lightgbm.Booster.predict returns for a regression model (of `trees` trees from
        tree `start` on; -1: all that follow)."""
        import numpy as np
        x = np.ascontiguousarray(rows, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"rows of {self.num_features} features expected, got shape {x.shape}")
        out = np.empty(x.shape[0], dtype=np.float64)
        length = ctypes.c_int64()
        self._fast_stale |= (start, trees) != (0, -1)   # predict_one()
        _check(_lib().LGBM_BoosterPredictForMat(
            self._handle, x.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(_DTYPE_FLOAT64),
            ctypes.c_int32(x.shape[0]), ctypes.c_int32(x.shape[1]), ctypes.c_int(1),
            ctypes.c_int(_PREDICT_NORMAL), ctypes.c_int(start), ctypes.c_int(trees),
            b"num_threads=1", ctypes.byref(length), out.ctypes.data_as(ctypes.POINTER(ctypes.c_double))))
        if length.value != x.shape[0]:
            raise LightGBMError(f"{length.value} predictions for {x.shape[0]} rows")
        return out
