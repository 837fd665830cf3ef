"""einsum and einsum_path over Kiln's ops.

A subscript string is read into one label list per operand and one for the result; ellipses
become labels of their own (characters no operand uses), so the rest of the module only ever
sees plain labels. The operands are then contracted two at a time in a greedy order: each
step picks the pair whose result is smallest relative to what it frees. A pair with labels to
contract becomes one batched matmul (transpose, reshape, matmul, reshape back); anything else
is a broadcast product and a sum. Every step is an ordinary lazy op, so einsum differentiates,
vmaps and compiles like the ops it is made of.
"""

import math
from string import ascii_letters

from . import _composites as _c
from . import _kiln as _k

_ELLIPSIS = "..."


class _Spec:
    """A parsed subscript string: ``inputs`` (one label list per operand, diagonals still
    repeated), ``output`` (labels in result order) and ``sizes`` (label -> extent)."""

    def __init__(self, inputs, output, sizes):
        self.inputs, self.output, self.sizes = inputs, output, sizes


def _fail(fn, msg):
    raise ValueError(f"[{fn}] {msg}")


def _split_term(term, fn):
    """Labels of one term, with ``None`` standing where its ellipsis is."""
    if term.count(_ELLIPSIS) > 1:
        _fail(fn, f"Only one ellipsis per term is allowed, got '{term}'.")
    head, dots, tail = term.partition(_ELLIPSIS)
    for ch in head + tail:
        if ch not in ascii_letters:
            _fail(fn, f"Invalid subscript character '{ch}' in '{term}'.")
    return list(head) + ([None] if dots else []) + list(tail)


def _fresh_labels(used, count):
    """``count`` labels no term uses, to name the axes an ellipsis covers."""
    # Any character works as a label internally; private-use code points never clash.
    free = (chr(c) for c in range(0xE000, 0xF8FF) if chr(c) not in used)
    return [next(free) for _ in range(count)]


def _expand(terms, shapes, fn):
    """Replace each term's ellipsis by labels for the axes it covers, right-aligned across
    terms (as broadcasting aligns them). Returns the expanded terms and the ellipsis labels."""
    covered = []
    for term, shape in zip(terms, shapes):
        named = sum(1 for t in term if t is not None)
        extra = len(shape) - named
        if extra < 0 or (extra > 0 and None not in term):
            _fail(fn, f"Term '{''.join(t or _ELLIPSIS for t in term)}' does not match an "
                      f"operand of {len(shape)} dimensions.")
        covered.append(extra)
    used = {t for term in terms for t in term if t is not None}
    dots = _fresh_labels(used, max(covered, default=0))
    expanded = []
    for term, extra in zip(terms, covered):
        mine = dots[len(dots) - extra:]
        out = []
        for t in term:
            out.extend(mine if t is None else [t])
        expanded.append(out)
    return expanded, dots


def _label_sizes(inputs, shapes, fn):
    """Each label's extent; an extent of 1 broadcasts against any other."""
    sizes = {}
    for labels, shape in zip(inputs, shapes):
        for label, n in zip(labels, shape):
            seen = sizes.get(label, 1)
            if seen != n and 1 not in (seen, n):
                _fail(fn, f"Cannot broadcast dimension '{label}' of sizes {seen} and {n}.")
            sizes[label] = max(seen, n)
    return sizes


def _implicit_output(inputs, dots):
    """NumPy's rule: the ellipsis axes, then every label used once, alphabetically."""
    counts = {}
    for labels in inputs:
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
    singles = sorted(l for l, c in counts.items() if c == 1 and l not in dots)
    return list(dots) + singles


def _parse(subscripts, operands, fn):
    text = subscripts.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = [_split_term(t, fn) for t in lhs.split(",")]
    if len(terms) != len(operands):
        _fail(fn, f"Number of operands, {len(operands)}, does not match the number of "
                  f"terms, {len(terms)}, in '{subscripts}'.")
    shapes = [tuple(a.shape) for a in operands]
    inputs, dots = _expand(terms, shapes, fn)
    sizes = _label_sizes(inputs, shapes, fn)
    if not arrow:
        return _Spec(inputs, _implicit_output(inputs, dots), sizes)
    out_term = _split_term(rhs, fn)
    if None not in out_term and dots:
        _fail(fn, "The output has no ellipsis for the axes the inputs' ellipses cover.")
    output = []
    for t in out_term:
        output.extend(dots if t is None else [t])
    for label in output:
        if label not in sizes:
            _fail(fn, f"Output subscript '{label}' does not appear in any input.")
    if len(set(output)) != len(output):
        _fail(fn, f"Output subscripts repeat a label in '{subscripts}'.")
    return _Spec(inputs, output, sizes)


# ---- contraction order ----------------------------------------------------------------------

def _volume(labels, sizes):
    return math.prod(sizes[l] for l in labels)


def _kept_after(terms, skip, output):
    """Labels something other than the terms at positions ``skip`` still needs."""
    keep = set(output)
    for i, t in enumerate(terms):
        if i not in skip:
            keep |= t
    return keep


def _pair_choice(terms, output, sizes, limit):
    """The pair to contract next: the smallest growth (result size less both inputs' sizes)
    among pairs sharing a label, else the smallest outer product. None when every pair would
    make an intermediate over ``limit``."""
    best = None
    for shared_only in (True, False):
        for i in range(len(terms)):
            for j in range(i + 1, len(terms)):
                if shared_only and not (terms[i] & terms[j]):
                    continue
                result = (terms[i] | terms[j]) & _kept_after(terms, (i, j), output)
                size = _volume(result, sizes)
                if size > limit:
                    continue
                growth = size - _volume(terms[i], sizes) - _volume(terms[j], sizes)
                key = (growth if shared_only else size, i, j)
                if best is None or key < best[0]:
                    best = (key, (i, j), result)
        if best is not None:
            return best[1], best[2]
    return None


def _plan(spec):
    """The contraction steps: a list of (positions, result labels), positions into the list
    of live operands, which loses those and gains the result at its end."""
    terms = [set(t) for t in spec.inputs]
    output = set(spec.output)
    # No intermediate may be larger than the largest operand or the result.
    limit = max([_volume(t, spec.sizes) for t in terms] + [_volume(output, spec.sizes)])
    steps = []
    while len(terms) > 2:
        choice = _pair_choice(terms, output, spec.sizes, limit)
        if choice is None:
            break
        (i, j), result = choice
        steps.append(((i, j), result))
        terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [result]
    steps.append((tuple(range(len(terms))), set(output)))
    return steps


def _flops(steps, spec):
    """A multiply-add count for the steps, to report alongside the path."""
    terms = [set(t) for t in spec.inputs]
    total = 0
    for positions, result in steps:
        touched = set().union(*(terms[p] for p in positions))
        total += _volume(touched, spec.sizes) * max(len(positions), 1)
        terms = [t for k, t in enumerate(terms) if k not in positions] + [result]
    return total


def einsum_path(subscripts, *operands):
    """The order einsum contracts ``operands`` in: ``(path, text)``, where path lists tuples
    of positions in the list of live operands (each step removes those and appends its
    result) and text reports the cost against contracting everything at once."""
    operands = [_k.asarray(a) for a in operands]
    spec = _parse(subscripts, operands, "einsum_path")
    steps = _plan(spec)
    at_once = _volume(set().union(*map(set, spec.inputs)), spec.sizes) * max(len(operands), 1)
    largest = max(_volume(r, spec.sizes) for _, r in steps)
    text = (f"  Subscripts:            {subscripts}\n"
            f"  Steps:                 {len(steps)}\n"
            f"  Naive FLOP count:      {at_once}\n"
            f"  Optimized FLOP count:  {_flops(steps, spec)}\n"
            f"  Largest intermediate:  {largest} elements\n")
    return [p for p, _ in steps], text


# ---- evaluation -----------------------------------------------------------------------------

class _Term:
    """An operand during evaluation: the array and one distinct label per axis."""

    def __init__(self, array, labels):
        self.array, self.labels = array, list(labels)


def _take_diagonals(array, labels, stream):
    """Collapse each repeated label to its diagonal, so every label names one axis."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        first = next(l for l in labels if labels.count(l) > 1)
        a = labels.index(first)
        b = labels.index(first, a + 1)
        # diagonal drops both axes and appends their diagonal last.
        array = _c.diagonal(array, 0, a, b, stream=stream)
        labels = [l for k, l in enumerate(labels) if k not in (a, b)] + [first]
    return _Term(array, labels)


def _sum_labels(term, labels, stream):
    axes = [term.labels.index(l) for l in labels]
    if not axes:
        return term
    array = _k.sum(term.array, axes, stream=stream)
    return _Term(array, [l for l in term.labels if l not in labels])


def _arrange(term, order, sizes, stream):
    """``term`` with its axes in ``order``: labels it lacks become broadcast axes of extent
    1, and extent-1 axes are broadcast to the label's full size when ``sizes`` is given."""
    perm = [term.labels.index(l) for l in order if l in term.labels]
    array = _k.transpose(term.array, perm, stream=stream)
    present = [l for l in order if l in term.labels]
    shape = [array.shape[present.index(l)] if l in term.labels else 1 for l in order]
    array = _k.reshape(array, shape, stream=stream)
    if sizes is not None:
        array = _k.broadcast_to(array, [sizes[l] for l in order], stream=stream)
    return array


def _matmul_pair(a, b, keep, sizes, stream):
    """Contract two terms as one batched matmul: batch (both, kept) x rows (a only) x
    shared (both, summed) against batch x shared x columns (b only)."""
    batch = [l for l in a.labels if l in b.labels and l in keep]
    shared = [l for l in a.labels if l in b.labels and l not in keep]
    rows = [l for l in a.labels if l not in b.labels]
    cols = [l for l in b.labels if l not in a.labels]

    def flat(term, first, second):
        array = _arrange(term, batch + first + second, sizes, stream)
        dims = [math.prod(sizes[l] for l in g) for g in (batch, first, second)]
        return _k.reshape(array, dims, stream=stream)

    product = _k.matmul(flat(a, rows, shared), flat(b, shared, cols), stream=stream)
    labels = batch + rows + cols
    return _Term(_k.reshape(product, [sizes[l] for l in labels], stream=stream), labels)


def _broadcast_product(terms, keep, sizes, stream):
    """Multiply terms aligned on their joint labels, then sum the ones not kept."""
    order = []
    for t in terms:
        order.extend(l for l in t.labels if l not in order)
    product = None
    for t in terms:
        array = _arrange(t, order, None, stream)
        product = array if product is None else _k.multiply(product, array, stream=stream)
    # A label every term has at extent 1 is still that label's full size in the result.
    product = _k.broadcast_to(product, [sizes[l] for l in order], stream=stream)
    return _sum_labels(_Term(product, order), [l for l in order if l not in keep], stream)


def _contract(terms, keep, sizes, stream):
    # Labels only one operand carries and nothing later needs are summed first: cheaper.
    trimmed = []
    for t in terms:
        others = set().union(*(set(u.labels) for u in terms if u is not t))
        trimmed.append(_sum_labels(t, [l for l in t.labels
                                       if l not in keep and l not in others], stream))
    if len(trimmed) == 2:
        a, b = trimmed
        if any(l in b.labels and l not in keep for l in a.labels):
            return _matmul_pair(a, b, keep, sizes, stream)
    return _broadcast_product(trimmed, keep, sizes, stream)


def einsum(subscripts, *operands, stream=None):
    """Einstein summation over ``operands`` as NumPy's subscript notation describes,
    ellipses included, contracted pairwise in einsum_path's order."""
    operands = [_k.asarray(a) for a in operands]
    spec = _parse(subscripts, operands, "einsum")
    live = [_take_diagonals(a, labels, stream) for a, labels in zip(operands, spec.inputs)]
    for positions, result in _plan(spec):
        chosen = [live[p] for p in positions]
        live = [t for k, t in enumerate(live) if k not in positions]
        live.append(_contract(chosen, result, spec.sizes, stream))
    (last,) = live
    return _arrange(last, spec.output, spec.sizes, stream)
