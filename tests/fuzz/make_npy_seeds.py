#!/usr/bin/python3
"""Writes the seed corpus for fuzz_npy into npy_seeds/ with NumPy (python3-numpy).

Valid files of format versions 1.0, 2.0 and 3.0, several dtypes (including ones Kiln does not
read yet: they exercise the error paths), shapes from 0-d to 3-d, C and Fortran order. The
output is deterministic; rerun after changing the list and commit the files.
"""
import os

import numpy as np
from numpy.lib import format as npy_format

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npy_seeds")

SEEDS = [
    # name, array, format version
    ("v1_f4_2x3", np.arange(6, dtype="<f4").reshape(2, 3) / 4, (1, 0)),
    ("v1_f8_scalar", np.array(4.5, dtype="<f8"), (1, 0)),
    ("v1_i4_4", np.array([1, -2, 3, -4], dtype="<i4"), (1, 0)),
    ("v1_i8_fortran_2x3", np.asfortranarray(np.arange(6, dtype="<i8").reshape(2, 3)), (1, 0)),
    ("v1_b1_3", np.array([True, False, True]), (1, 0)),
    ("v1_f4_empty_0x3", np.zeros((0, 3), dtype="<f4"), (1, 0)),
    ("v1_f2_2x2", np.array([[0.5, -1], [2, 65504]], dtype="<f2"), (1, 0)),
    ("v1_u1_5", np.arange(5, dtype="u1"), (1, 0)),
    ("v1_f4_bigendian_2", np.array([1.5, -2], dtype=">f4"), (1, 0)),
    ("v2_i4_3", np.array([7, -8, 9], dtype="<i4"), (2, 0)),
    ("v2_f8_2x2x2", np.linspace(-1, 1, 8).reshape(2, 2, 2), (2, 0)),
    ("v3_b1_2", np.array([False, True]), (3, 0)),
    ("v3_f4_1", np.array([3.25], dtype="<f4"), (3, 0)),
]


def main():
    os.makedirs(HERE, exist_ok=True)
    for name, array, version in SEEDS:
        with open(os.path.join(HERE, name + ".npy"), "wb") as f:
            npy_format.write_array(f, array, version=version, allow_pickle=False)


if __name__ == "__main__":
    main()
