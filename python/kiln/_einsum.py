"""einsum and einsum_path with mlx.core's semantics, built from Kiln's ops.

A port of MLX's mlx/einsum.cpp (itself NumPy's and opt_einsum's greedy algorithm): the same
parsing (implicit output in alphabetical order, ellipses, broadcasting of size-1 axes), the same
greedy contraction path (so ``einsum_path`` returns MLX's, which is NumPy's ``optimize="greedy"``
path), and each step done the same way: repeated subscripts collapsed to their diagonal, axes
only one operand has summed first, a pair with something to contract as one batched matmul,
anything else as broadcast multiplies and a sum. Everything is an ordinary lazy op, so einsum
fuses, differentiates and compiles like the ops it is written in.
"""

import itertools
import math

from . import _kiln as _k


def _error(fn, msg):
    return _k.Error(f"[{fn}] {msg}")


def _parse(subscripts):
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, rhs = subscripts.split("->", 1)
    else:
        # Implicit: labels seen once, alphabetically (by code point, as MLX sorts chars); an
        # ellipsis goes first.
        lhs = subscripts
        counts = {}
        rhs = ""
        for c in subscripts:
            if c == ",":
                continue
            if c == "." and not rhs:
                rhs = "..."
                continue
            counts[c] = counts.get(c, 0) + 1
        rhs += "".join(sorted(c for c, n in counts.items() if n == 1 and c != "."))
    return lhs.split(","), rhs


def _term_size(term, dims):
    size = 1
    for c in term:
        size *= dims[c]
    return size


def _flop_count(term, inner, num_terms, dims):
    factor = max(1, num_terms - 1) + (1 if inner else 0)
    return _term_size(term, dims) * factor


def _cost_and_scaling(inputs, output, dims):
    contractions = set().union(*[set(s) for s in inputs])
    inner = any(c not in output for c in contractions)
    return _flop_count(contractions, inner, len(inputs), dims), len(contractions)


def _greedy_path(inputs, output, dims, cost_limit, memory_limit):
    # inputs: list of subscript strings; returns [(positions, [subscripts], out subscript)],
    # the cost and the scaling. Each step removes two terms and appends their result.
    inputs = list(inputs)
    out_set = set(output)
    pos_pairs = list(itertools.combinations(range(len(inputs)), 2))
    path = []
    possible = []  # [removed size, cost, new term (set), dims, x, y]
    path_cost = 0
    path_scaling = 0
    for _ in range(len(inputs) - 1):
        def add(p1, p2):
            contractions = set(inputs[p1]) | set(inputs[p2])
            new_term = set()
            for i, s in enumerate(inputs):
                if i not in (p1, p2):
                    new_term |= contractions & set(s)
            new_term |= contractions & out_set
            new_size = _term_size(new_term, dims)
            if new_size > memory_limit:
                return
            removed = (_term_size(set(inputs[p1]), dims) + _term_size(set(inputs[p2]), dims)
                       - new_size)
            inner = len(contractions) > len(new_term)
            cost = _flop_count(contractions, inner, 2, dims)
            if path_cost + cost > cost_limit:
                return
            possible.append([removed, cost, new_term, len(contractions), p1, p2])

        for p1, p2 in pos_pairs:
            if set(inputs[p1]) & set(inputs[p2]):  # outer products last
                add(p1, p2)
        if not possible:
            for p1, p2 in pos_pairs:
                add(p1, p2)
        if not possible:
            cost, scale = _cost_and_scaling(inputs, output, dims)
            path.append((list(range(len(inputs))), list(inputs), output))
            path_cost += cost
            path_scaling = max(scale, path_scaling)
            break
        best = possible[0]
        for c in possible[1:]:  # the largest size removed, then the least cost; first wins
            if c[0] > best[0] or (c[0] == best[0] and c[1] < best[1]):
                best = c
        removed, cost, new_term, ndims, bx, by = best
        path_scaling = max(ndims, path_scaling)
        new_out = "".join(sorted(sorted(new_term), key=lambda c: dims[c]))
        path.append(([bx, by], [inputs[bx], inputs[by]], new_out))
        del inputs[by]
        del inputs[bx]
        inputs.append(new_out)
        updated = []
        for c in possible:
            if c[4] in (bx, by) or c[5] in (bx, by):
                continue
            c[4] -= (c[4] > bx) + (c[4] > by)
            c[5] -= (c[5] > bx) + (c[5] > by)
            updated.append(c)
        pos_pairs = [(i, len(inputs) - 1) for i in range(len(inputs) - 1)]
        path_cost += cost
        possible = updated
    return path, path_cost, path_scaling


def _path_helper(subscripts, operands, fn):
    if not operands:
        raise _error(fn, "At least one operand is required.")
    in_subs, out_sub = _parse(subscripts)
    if len(operands) != len(in_subs):
        raise _error(fn, f"Number of operands, {len(operands)}, does not match number of "
                         f"input subscripts, {len(in_subs)}")
    used = set(subscripts)
    remaining = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                 if c not in used]
    max_ellipsis = 0

    def expand(sub, operand, idx):
        nonlocal max_ellipsis
        have, before, after, i = False, 0, 0, 0
        start = 0
        while i < len(sub):
            if not sub[i].isalpha():
                if sub[i:i + 3] != "...":
                    raise _error(fn, f"Subscripts must be letters, but got '{sub[i]}'.")
                if have:
                    raise _error(fn, "Only one ellipsis per subscript is allowed but found "
                                     f"more in '{sub}'.")
                have, start = True, i
                i += 3
                continue
            if have:
                after += 1
            else:
                before += 1
            i += 1
        if not have:
            return sub
        if operand is not None:
            length = operand.ndim - before - after
            if length < 0:
                raise _error(fn, f"Operand {idx} with shape {tuple(operand.shape)} has "
                                 f"insufficient dimensions for subscript '{sub}'.")
            max_ellipsis = max(max_ellipsis, length)
        else:
            length = max_ellipsis
        fill = "".join(remaining[len(remaining) - length:]) if length else ""
        return sub[:start] + fill + sub[start + 3:]

    in_subs = [expand(s, operands[i], i) for i, s in enumerate(in_subs)]
    out_sub = expand(out_sub, None, -1)
    if len(set(out_sub)) != len(out_sub):
        raise _error(fn, "Repeat indices not allowed in output.")

    dims = {}
    for i, sub in enumerate(in_subs):
        shape = operands[i].shape
        if len(sub) != len(shape):
            raise _error(fn, f"Invalid number of subscripts {len(sub)} for input {i} with "
                             f"{len(shape)} dimensions.")
        local = {}
        for c, d in zip(sub, shape):
            if local.setdefault(c, d) != d:
                raise _error(fn, "Dimensions of repeated subscripts do not have the same "
                                 f"size ({local[c]} != {d}).")
        for j, (c, d) in enumerate(zip(sub, shape)):
            have = dims.setdefault(c, d)
            if d != 1 and have != 1 and have != d:
                raise _error(fn, f"Cannot broadcast dimension {j} of input {i} with shape "
                                 f"{tuple(shape)} to size {have}.")
            dims[c] = max(have, d)
    for c in out_sub:
        if c not in dims:
            raise _error(fn, f"Output subscript '{c}' does not appear in the inputs.")

    max_size = max([_term_size(out_sub, dims)] + [_term_size(s, dims) for s in in_subs])
    naive_cost, naive_scaling = _cost_and_scaling(in_subs, out_sub, dims)
    if len(in_subs) <= 2:
        path = [(list(range(len(in_subs))), list(in_subs), out_sub)]
        cost, scaling = naive_cost, naive_scaling
    else:
        path, cost, scaling = _greedy_path(in_subs, out_sub, dims, naive_cost, max_size)
        positions, ins, _ = path[-1]
        path[-1] = (positions, ins, out_sub)
    info = (naive_cost, naive_scaling, cost, scaling)
    return path, info, dims


def einsum_path(subscripts, *operands):
    """The contraction order einsum takes: ``(path, text)``, the path a list of tuples of
    operand positions (each step removes those operands and appends its result), as
    mlx.core.einsum_path and NumPy's ``einsum_path(..., optimize="greedy")``."""
    operands = [_k.asarray(a) for a in operands]
    path, (naive_cost, naive_scaling, cost, scaling), _ = _path_helper(
        subscripts, operands, "einsum_path")
    text = (f"  Complete contraction:  {subscripts}\n"
            f"         Naive scaling:  {naive_scaling}\n"
            f"     Optimized scaling:  {scaling}\n"
            f"      Naive FLOP count:  {naive_cost}\n"
            f"  Optimized FLOP count:  {cost}\n")
    return [tuple(p) for p, _, _ in path], text


def _collapse_repeats(x, sub, stream):
    # The diagonal over each repeated label: its axes moved together and flattened, then every
    # (n^k - 1) / (n - 1)-th element taken. Returns the array and its new subscript (repeated
    # labels first, as MLX orders them).
    counts = {}
    for c in sub:
        counts[c] = counts.get(c, 0) + 1
    repeats = [c for c in dict.fromkeys(sub) if counts[c] > 1]
    singles = [c for c in sub if counts[c] == 1]
    for c in repeats:
        axes = [i for i, s in enumerate(sub) if s == c]
        rest = [i for i, s in enumerate(sub) if s != c]
        n = x.shape[axes[0]]
        x = _k.transpose(x, axes + rest, stream=stream)
        x = _k.reshape(x, (n ** len(axes),) + tuple(x.shape[len(axes):]), stream=stream)
        step = sum(n ** j for j in range(len(axes)))
        x = _k.take(x, _k.multiply(_k.arange(n, stream=stream), step), axis=0, stream=stream)
        sub = c + "".join(sub[i] for i in rest)
    # Now sub is repeats (last collapsed first) then the rest in order; put it in MLX's order.
    want = "".join(repeats) + "".join(singles)
    if sub != want:
        x = _k.transpose(x, [sub.index(c) for c in want], stream=stream)
    return x, want


def _preprocess(ins, output, positions, operands, stream):
    ins = list(ins)
    for i, sub in enumerate(ins):
        if len(set(sub)) < len(sub):
            operands[positions[i]], ins[i] = _collapse_repeats(operands[positions[i]], sub,
                                                               stream)
    counts = {}
    for sub in ins:
        for c in set(sub):
            counts[c] = counts.get(c, 0) + 1
    for c in set(output):
        counts[c] = counts.get(c, 0) + 1
    for i, sub in enumerate(ins):
        axes = [ax for ax, c in enumerate(sub) if counts[c] == 1]
        if axes:
            operands[positions[i]] = _k.sum(operands[positions[i]], axes, False, stream=stream)
            ins[i] = "".join(c for ax, c in enumerate(sub) if ax not in axes)
    return ins


def _can_dot(ins, output):
    return len(ins) == 2 and any(c not in output for c in ins[0])


def _batch_tensordot(a, b, a_contract, a_batch, a_concat, b_contract, b_batch, b_concat,
                     stream):
    a_shape, b_shape = list(a.shape), list(b.shape)
    for ia, ib in zip(a_contract + a_batch, b_contract + b_batch):
        d = max(a_shape[ia], b_shape[ib])
        a_shape[ia] = b_shape[ib] = d
    a = _k.broadcast_to(a, a_shape, stream=stream)
    b = _k.broadcast_to(b, b_shape, stream=stream)

    def transpose_reshape(x, i, j, k):
        x2 = _k.transpose(x, i + j + k, stream=stream)
        shape = [x.shape[ax] for ax in i] + [math.prod(x.shape[ax] for ax in j),
                                             math.prod(x.shape[ax] for ax in k)]
        return _k.reshape(x2, shape, stream=stream)

    out_shape = ([a.shape[ax] for ax in a_batch] + [a.shape[ax] for ax in a_concat]
                 + [b.shape[ax] for ax in b_concat])
    a = transpose_reshape(a, a_batch, a_concat, a_contract)
    b = transpose_reshape(b, b_batch, b_contract, b_concat)
    return _k.reshape(_k.matmul(a, b, stream=stream), out_shape, stream=stream)


def _naive(ins, output, positions, operands, stream):
    char_to_ax = {}
    for sub in ins:
        for c in sub:
            char_to_ax.setdefault(c, len(char_to_ax))
    n = len(char_to_ax)
    terms = []
    for i, sub in enumerate(ins):
        op = operands[positions[i]]
        if op.ndim != n:
            op = _k.reshape(op, tuple(op.shape) + (1,) * (n - op.ndim), stream=stream)
        str_ax = [(c, ax) for ax, c in enumerate(sub)]
        str_ax += [(c, len(sub) + j) for j, c in enumerate(c for c in char_to_ax
                                                          if c not in sub)]
        str_ax.sort(key=lambda p: char_to_ax[p[0]])
        order = [ax for _, ax in str_ax]
        if order != sorted(order):
            op = _k.transpose(op, order, stream=stream)
        terms.append(op)
    out = terms[0]
    for t in terms[1:]:
        out = _k.multiply(out, t, stream=stream)
    sum_axes = [ax for c, ax in char_to_ax.items() if c not in output]
    if sum_axes:
        out = _k.sum(out, sum_axes, False, stream=stream)
    reorder = [char_to_ax[c] for c in output]
    reorder = [r - sum(1 for s in sum_axes if r > s) for r in reorder]
    return _k.transpose(out, reorder, stream=stream)


def einsum(subscripts, *operands, stream=None):
    """Einstein summation over ``operands`` as ``subscripts`` describe (NumPy's notation,
    ellipses included), with mlx.core.einsum's semantics and greedy contraction order."""
    operands = [_k.asarray(a) for a in operands]
    path, _, _ = _path_helper(subscripts, operands, "einsum")
    inputs = list(operands)
    for positions, ins, output in path:
        ins = _preprocess(ins, output, positions, inputs, stream)
        if _can_dot(ins, output):
            in_a, in_b = ins
            a_contract, a_batch, a_concat = [], [], []
            for i, c in enumerate(in_a):
                if c not in output:
                    a_contract.append(i)
                elif c in in_b:
                    a_batch.append(i)
                else:
                    a_concat.append(i)
            b_contract = [in_b.index(in_a[i]) for i in a_contract]
            b_batch = [in_b.index(in_a[i]) for i in a_batch]
            b_concat = [i for i, c in enumerate(in_b) if c in output and c not in in_a]
            char_map = {}
            for i in a_batch + a_concat:
                char_map.setdefault(in_a[i], len(char_map))
            for i in b_concat:
                char_map.setdefault(in_b[i], len(char_map))
            r = _batch_tensordot(inputs[positions[0]], inputs[positions[1]], a_contract,
                                 a_batch, a_concat, b_contract, b_batch, b_concat, stream)
            r = _k.transpose(r, [char_map[c] for c in output], stream=stream)
        else:
            r = _naive(ins, output, positions, inputs, stream)
        inputs.append(r)
        for p in sorted(positions, reverse=True):
            del inputs[p]
    return inputs[0]
