"""kiln.nn: modules as pytrees (parameters, update, freeze, train/eval, weight files), layers
against NumPy, and a user's Module subclass through grad, compile and an optimizer."""
from functools import partial

import numpy as np
import pytest

import kiln as mx
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.utils import tree_flatten, tree_map, tree_unflatten


def np_of(a):
    return np.array(a.astype(mx.float64)) if a.dtype == mx.bfloat16 else np.array(a)


class MLP(nn.Module):
    """A user's model: a list of layers, a norm and a dropout, with its own __call__."""

    def __init__(self, dims=(4, 8, 3), p=0.0):
        super().__init__()
        self.layers = [nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])]
        self.norm = nn.LayerNorm(dims[1])
        self.drop = nn.Dropout(p)
        self.depth = len(dims) - 1  # a plain attribute, not a parameter

    def __call__(self, x):
        h = nn.gelu(self.norm(self.layers[0](x)))
        return self.layers[1](self.drop(h))


def test_module_tree_names_and_plain_attributes():
    m = MLP()
    names = [k for k, _ in tree_flatten(m.parameters())]
    assert names == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                     "norm.weight", "norm.bias"]
    assert m.depth == 2 and "depth" not in m
    assert isinstance(m.children()["layers"][0], nn.Linear)
    assert [n for n, _ in m.named_modules()] == ["layers.0", "layers.1", "norm", "drop", ""]
    leaves = m.leaf_modules()
    assert isinstance(leaves["norm"], nn.LayerNorm) and len(leaves["layers"]) == 2
    assert m.layers[0].weight.shape == (8, 4)  # MLX's (out, in) layout
    seen = []
    m.apply_to_modules(lambda name, mod: seen.append(name))
    assert seen[-1] == "" and len(seen) == 5


def test_update_replaces_arrays_in_place_and_checks_names():
    m = MLP()
    inner = m.layers[0]
    m.update({"layers": [{"bias": mx.zeros((8,))}]})
    assert m.layers[0] is inner and inner.bias.tolist() == [0.0] * 8
    with pytest.raises(mx.Error, match="no entry 'nope'"):
        m.update({"nope": mx.zeros(1)})
    with pytest.raises(mx.Error, match="given a int"):
        m.update({"norm": {"weight": 3}})
    m.update({"nope": mx.zeros(1)}, strict=False)
    assert "nope" not in m
    m.apply(lambda a: a * 0)
    assert all(float(mx.sum(mx.abs(v)).item()) == 0 for _, v in tree_flatten(m.parameters()))
    m.set_dtype(mx.float16)
    assert m.norm.weight.dtype == mx.float16


def test_freeze_and_unfreeze():
    m = MLP()
    m.freeze()
    assert tree_flatten(m.trainable_parameters()) == []
    m.layers[1].unfreeze(keys="bias")
    assert [k for k, _ in tree_flatten(m.trainable_parameters())] == ["layers.1.bias"]
    m.unfreeze()
    m.norm.freeze()
    assert "norm.weight" not in dict(tree_flatten(m.trainable_parameters()))
    assert "norm.weight" in dict(tree_flatten(m.parameters()))
    with pytest.raises(mx.Error, match="no parameters named"):
        m.norm.freeze(keys=["scale"], strict=True)


def test_train_and_eval_switch_dropout():
    m = MLP(p=0.5)
    assert m.training and m.drop.training
    m.eval()
    assert not m.drop.training
    x = mx.ones((4, 100))
    drop = nn.Dropout(0.25)
    assert np.array_equal(np.array(drop.eval()(x)), np.ones((4, 100)))
    y = np_of(drop.train()(x))
    kept = y != 0
    assert 0.6 < kept.mean() < 0.9 and np.allclose(y[kept], 1 / 0.75)
    with pytest.raises(mx.Error, match=r"p must be in \[0, 1\)"):
        nn.Dropout(1.0)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float64, mx.float16, mx.int32, mx.uint8,
                                   mx.int64, mx.bool_, mx.int8, mx.uint32, mx.uint64])
def test_weights_round_trip_through_numpy(tmp_path, dtype):
    m = nn.Module()
    m.w = (mx.random.normal((3, 5)) * 10).astype(dtype)
    m.sub = {"v": mx.arange(4).astype(dtype), "s": mx.array(1).astype(dtype)}
    path = tmp_path / "w.npz"
    m.save_weights(str(path))
    npz = np.load(path)
    assert sorted(npz.files) == ["sub.s", "sub.v", "w"]
    np.testing.assert_array_equal(npz["w"], np.array(m.w))
    assert npz["w"].dtype == np.array(m.w).dtype and npz["sub.s"].shape == ()
    other = nn.Module()
    other.w = mx.zeros((3, 5), dtype)
    other.sub = {"v": mx.zeros((4,), dtype), "s": mx.zeros((), dtype)}
    other.load_weights(str(path))
    assert mx.array_equal(other.w, m.w).item() and other.sub["s"].item() == m.sub["s"].item()


def test_weights_written_by_numpy_load_and_bad_files_raise(tmp_path):
    path = tmp_path / "np.npz"
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.savez(path, weight=w, bias=np.ones(2, np.float32))
    lin = nn.Linear(3, 2).load_weights(str(path))
    assert lin.weight.tolist() == w.tolist()
    np.savez(tmp_path / "bad.npz", weight=w.T.copy(), bias=np.ones(2, np.float32))
    with pytest.raises(mx.Error, match=r"shape \(3, 2\); the module's is \(2, 3\)"):
        lin.load_weights(str(tmp_path / "bad.npz"))
    with pytest.raises(mx.Error, match=r"missing \['bias'\]"):
        lin.load_weights([("weight", mx.zeros((2, 3)))])
    lin.load_weights([("weight", mx.zeros((2, 3)))], strict=False)
    assert lin.weight.tolist() == [[0.0] * 3] * 2
    m = nn.Module()
    m.w = mx.zeros(2, mx.bfloat16)
    with pytest.raises(mx.Error, match="bfloat16, which .npy cannot hold"):
        m.save_weights(str(tmp_path / "b.npz"))
    # .safetensors holds bfloat16 too, and reads back into a fresh module.
    m.save_weights(str(tmp_path / "b.safetensors"))
    m2 = nn.Module()
    m2.w = mx.ones(2, mx.bfloat16)
    m2.load_weights(str(tmp_path / "b.safetensors"))
    assert m2.w.dtype == mx.bfloat16 and m2.w.tolist() == [0.0, 0.0]
    lin.save_weights(str(tmp_path / "w.safetensors"))
    lin2 = nn.Linear(3, 2).load_weights(str(tmp_path / "w.safetensors"))
    assert np.array_equal(np_of(lin2.weight), np_of(lin.weight))


def test_linear_embedding_norms_attention_against_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    lin = nn.Linear(8, 3)
    want = x @ np.array(lin.weight).T + np.array(lin.bias)
    np.testing.assert_allclose(np.array(lin(mx.array(x))), want, rtol=1e-5, atol=1e-5)
    assert "bias" not in nn.Linear(8, 3, bias=False)

    ln = nn.LayerNorm(8, eps=1e-5)
    ln.update({"weight": mx.array(rng.standard_normal(8).astype(np.float32))})
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    want = (x - mu) / np.sqrt(var + 1e-5) * np.array(ln.weight)
    np.testing.assert_allclose(np.array(ln(mx.array(x))), want, rtol=1e-4, atol=1e-5)
    rms = nn.RMSNorm(8)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.array(rms(mx.array(x))), want, rtol=1e-4, atol=1e-5)

    emb = nn.Embedding(10, 4)
    ids = np.array([[1, 9], [0, 3]])
    np.testing.assert_array_equal(np.array(emb(mx.array(ids))), np.array(emb.weight)[ids])
    np.testing.assert_allclose(np.array(emb.as_linear(mx.array(x[..., :4]))),
                               x[..., :4] @ np.array(emb.weight).T, rtol=1e-5, atol=1e-5)

    att = nn.MultiHeadAttention(8, 2)
    mask = nn.MultiHeadAttention.create_additive_causal_mask(5)
    got = np.array(att(mx.array(x), mx.array(x), mx.array(x), mask))
    p = {k: np.array(v) for k, v in tree_flatten(att.parameters())}
    q = (x @ p["query_proj.weight"].T).reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)
    k = (x @ p["key_proj.weight"].T).reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)
    v = (x @ p["value_proj.weight"].T).reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) / 2.0 + np.triu(np.full((5, 5), -1e9), 1)
    s = np.exp(s - s.max(-1, keepdims=True))
    o = (s / s.sum(-1, keepdims=True)) @ v
    want = o.transpose(0, 2, 1, 3).reshape(2, 5, 8) @ p["out_proj.weight"].T
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(mx.Error, match="divisible by num_heads"):
        nn.MultiHeadAttention(6, 4)


def test_activations_against_numpy():
    x = np.linspace(-4, 4, 41).astype(np.float32)
    a = mx.array(x)
    sig = 1 / (1 + np.exp(-x))
    softplus = np.log1p(np.exp(x))
    import math
    erf = np.vectorize(math.erf)
    cases = {
        "relu": (nn.relu, np.maximum(x, 0)), "relu6": (nn.relu6, np.clip(x, 0, 6)),
        "leaky_relu": (nn.leaky_relu, np.where(x > 0, x, 0.01 * x)),
        "elu": (nn.elu, np.where(x > 0, x, np.expm1(x))), "silu": (nn.silu, x * sig),
        "sigmoid": (nn.sigmoid, sig), "tanh": (nn.tanh, np.tanh(x)),
        "softplus": (nn.softplus, softplus), "log_sigmoid": (nn.log_sigmoid, -np.log1p(np.exp(-x))),
        "mish": (nn.mish, x * np.tanh(softplus)),
        "gelu": (nn.gelu, x * (1 + erf(x / np.sqrt(2))) / 2),
        "gelu_approx": (nn.gelu_approx, 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) *
                                                               (x + 0.044715 * x**3)))),
        "hardswish": (nn.hardswish, x * np.clip(x + 3, 0, 6) / 6),
        "selu": (nn.selu, 1.0507 * np.where(x > 0, x, 1.67326 * np.expm1(x))),
        "softsign": (nn.softsign, x / (1 + np.abs(x))),
        "softmax": (nn.softmax, np.exp(x) / np.exp(x).sum()),
        "log_softmax": (nn.log_softmax, x - np.log(np.exp(x).sum())),
    }
    for name, (fn, want) in cases.items():
        np.testing.assert_allclose(np.array(fn(a)), want, rtol=1e-4, atol=1e-5, err_msg=name)
    classes = {nn.ReLU(): nn.relu, nn.GELU(): nn.gelu, nn.GELU(approx="tanh"): nn.gelu_approx,
               nn.SiLU(): nn.silu, nn.LeakyReLU(0.2): lambda v: nn.leaky_relu(v, 0.2),
               nn.Softmax(): nn.softmax, nn.Tanh(): nn.tanh}
    for mod, fn in classes.items():
        assert mx.allclose(mod(a), fn(a)).item(), mod
    np.testing.assert_allclose(np.array(nn.glu(mx.array(x[:40]))), x[:20] * sig[20:40],
                               rtol=1e-5)
    with pytest.raises(mx.Error, match="approx is 'bad'"):
        nn.GELU(approx="bad")
    with pytest.raises(mx.Error, match="unknown argument 'slope'"):
        nn.LeakyReLU(slope=0.1)
    prelu = nn.PReLU()
    assert prelu(mx.array([-4.0, 2.0])).tolist() == [-1.0, 2.0]


def test_init_functions():
    a = mx.zeros((64, 32))
    assert mx.all(nn.init.constant(0.5)(a) == 0.5).item()
    assert nn.init.identity()(mx.zeros((3, 3))).tolist() == np.eye(3).tolist()
    g = np.array(nn.init.glorot_uniform()(a))
    limit = np.sqrt(6 / (64 + 32))
    assert g.shape == (64, 32) and np.abs(g).max() <= limit and np.abs(g).max() > 0.8 * limit
    h = np.array(nn.init.he_normal()(mx.zeros((256, 512))))
    assert abs(h.std() - 1 / np.sqrt(512)) < 0.1 / np.sqrt(512)
    u = np.array(nn.init.uniform(-2, -1)(a))
    assert u.min() >= -2 and u.max() < -1
    with pytest.raises(mx.Error, match="2 or more axes"):
        nn.init.glorot_normal()(mx.zeros(3))
    with pytest.raises(mx.Error, match="square 2-d"):
        nn.init.identity()(mx.zeros((2, 3)))


def loss_fn(model, x, y):
    return nn.losses.cross_entropy(model(x), y, reduction="mean")


def test_value_and_grad_of_a_user_module_matches_grad_of_its_function():
    m = MLP()
    x = mx.random.normal((6, 4), key=mx.random.key(3))
    y = mx.array([0, 1, 2, 0, 1, 2])
    loss, grads = nn.value_and_grad(m, loss_fn)(m, x, y)
    params = m.parameters()

    def explicit(p):
        m.update(p)
        return loss_fn(m, x, y)

    want = mx.grad(explicit)(params)
    m.update(params)
    for (k, g), (k2, w) in zip(tree_flatten(grads), tree_flatten(want)):
        assert k == k2 and np.allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-6), k
    assert abs(loss.item() - explicit(params).item()) < 1e-6
    # the model holds its own arrays again, not the transform's
    assert m.layers[0].weight is params["layers"][0]["weight"]
    m.layers[0].freeze()
    _, grads = nn.value_and_grad(m, loss_fn)(m, x, y)
    assert grads["layers"][0] == {} and "weight" in grads["layers"][1]


def test_compiled_training_step_of_a_user_module_matches_eager():
    def run(compiled):
        mx.random.seed(7)
        m = MLP()
        opt = optim.AdamW(learning_rate=1e-2)
        opt.init(m.trainable_parameters())
        x = mx.random.normal((16, 4))
        y = mx.random.randint(0, 3, (16,))
        state = [m.state, opt.state]

        def step(x, y):
            loss, grads = nn.value_and_grad(m, loss_fn)(m, x, y)
            opt.update(m, grads)
            return loss

        if compiled:
            step = partial(mx.compile, inputs=state, outputs=state)(step)
        losses = [step(x, y).item() for _ in range(8)]
        return losses, m, step

    compiled, cm, cstep = run(True)
    eager, em, _ = run(False)
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    assert compiled[-1] < compiled[0]
    assert cstep.cache_size == 1
    for (k, a), (_, b) in zip(tree_flatten(cm.parameters()), tree_flatten(em.parameters())):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-6, err_msg=k)


def test_sequential_and_tree_helpers():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    p = s.parameters()
    assert p["layers"][1] == {} and s(mx.ones((5, 2))).shape == (5, 1)
    flat = tree_flatten(p)
    assert [k for k, _ in flat] == ["layers.0.weight", "layers.0.bias", "layers.2.weight",
                                    "layers.2.bias"]
    back = tree_unflatten(flat)
    assert back["layers"][1] == {} and back["layers"][2]["bias"] is p["layers"][2]["bias"]
    s.update(tree_map(lambda a: a * 0, back))
    assert s(mx.ones((1, 2))).tolist() == [[0.0]]


def test_tree_merge():
    from kiln.utils import tree_merge
    a = {"w": mx.ones(2), "sub": [{}, {"b": mx.zeros(1)}]}
    b = {"sub": [{"c": mx.ones(1)}, {}], "extra": mx.zeros(3)}
    m = tree_merge(a, b)
    assert [k for k, _ in tree_flatten(m)] == ["w", "sub.0.c", "sub.1.b", "extra"]
    assert tree_merge({"x": mx.ones(1)}, {"x": mx.ones(1)}, lambda p, q: p + q)["x"].item() == 2
    with pytest.raises(mx.Error, match="pass merge_fn"):
        tree_merge({"x": mx.ones(1)}, {"x": mx.ones(1)})
    with pytest.raises(mx.Error, match="cannot merge a dict with a list"):
        tree_merge({}, [])


def test_compiled_step_writes_the_new_state_into_the_old_states_memory():
    # inputs and outputs are one tree: the step lets go of the old state, so the plan can write
    # the new parameters and optimizer state into its memory instead of beside it.
    model = nn.Sequential(nn.Linear(1024, 1024, bias=False), nn.Linear(1024, 1024, bias=False))
    opt = optim.Adam(learning_rate=1e-3)
    opt.init(model.trainable_parameters())
    x, y = mx.random.normal((8, 1024)), mx.random.normal((8, 1024))
    state = [model.state, opt.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = nn.value_and_grad(model, lambda m, x, y: nn.losses.mse_loss(m(x), y))(
            model, x, y)
        opt.update(model, grads)
        return loss

    mx.eval(step(x, y), state)
    # (tree_flatten here also checks that it keeps nothing alive once it returns)
    state_bytes = sum(a.nbytes for _, a in tree_flatten(state))  # weights, m, v: 25 MB
    before = mx.get_active_memory()
    mx.reset_peak_memory()
    mx.eval(step(x, y), state)
    grown = mx.get_peak_memory() - before
    # The gradients (8 MB) are new; without donation the new state (25 MB) is too.
    assert grown < state_bytes / 2, (grown, state_bytes)

    # An old array the user still holds is not overwritten.
    old = model.layers[0].weight
    copy = np.array(old)
    mx.eval(step(x, y), state)
    assert np.array_equal(np.array(old), copy)
    assert not mx.array_equal(model.layers[0].weight, old).item()


def test_a_failing_trace_leaves_the_captured_state_as_it_was():
    model = nn.Linear(4, 4)
    state = [model.state]
    weight = model.weight

    @partial(mx.compile, inputs=state, outputs=state)
    def bad(x):
        model.weight = model.weight * 2
        raise ValueError("from the step")

    with pytest.raises(ValueError, match="from the step"):
        bad(mx.ones(4))
    assert mx.array_equal(model.weight, weight).item() and model.weight.shape == (4, 4)


# ---- the layers beyond Linear/LayerNorm (normalization, pooling, recurrent, transformer,
# positional encodings, upsampling), each against a NumPy reference ----


def test_batch_group_instance_norm_match_numpy():
    x = np.random.default_rng(0).standard_normal((4, 3, 5, 6)).astype(np.float32)
    bn = nn.BatchNorm(6, momentum=0.1)
    y = bn(mx.array(x))
    mean, var = x.mean((0, 1, 2)), x.var((0, 1, 2))
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bn.running_mean, 0.1 * mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(bn.running_var, 0.9 + 0.1 * x.var((0, 1, 2), ddof=1), rtol=1e-4)
    assert "running_mean" not in bn.trainable_parameters()
    bn.eval()
    np.testing.assert_allclose(bn(mx.array(x)), (x - np_of(bn.running_mean)) / np.sqrt(
        np_of(bn.running_var) + 1e-5), rtol=1e-4, atol=1e-4)
    g = nn.GroupNorm(2, 6)
    xg = x.reshape(4, -1, 2, 3)  # MLX's grouping: features split as (..., groups) interleaved
    xr = x.reshape(4, -1, 2)
    want = (xr - xr.mean(1, keepdims=True)) / np.sqrt(xr.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(g(mx.array(x)), want.reshape(x.shape), rtol=1e-4, atol=1e-4)
    gp = nn.GroupNorm(2, 6, pytorch_compatible=True)
    xt = xg.transpose(0, 2, 1, 3).reshape(4, 2, -1)
    wt = (xt - xt.mean(-1, keepdims=True)) / np.sqrt(xt.var(-1, keepdims=True) + 1e-5)
    wt = wt.reshape(4, 2, -1, 3).transpose(0, 2, 1, 3).reshape(x.shape)
    np.testing.assert_allclose(gp(mx.array(x)), wt, rtol=1e-4, atol=1e-4)
    inorm = nn.InstanceNorm(6, affine=True)
    m, v = x.mean((1, 2), keepdims=True), x.var((1, 2), keepdims=True)
    np.testing.assert_allclose(inorm(mx.array(x)), (x - m) / np.sqrt(v + 1e-5), rtol=1e-4,
                               atol=1e-4)


def test_pooling_and_upsample_match_numpy():
    x = np.random.default_rng(1).standard_normal((2, 7, 6, 3)).astype(np.float32)
    for k, s, p in ((2, 2, 0), (3, 2, 1), (2, 1, 0)):
        xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)), constant_values=-np.inf)
        oh, ow = (xp.shape[1] - k) // s + 1, (xp.shape[2] - k) // s + 1
        win = np.stack([xp[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
                        for i in range(k) for j in range(k)], axis=3)
        np.testing.assert_allclose(nn.MaxPool2d(k, s, p)(mx.array(x)), win.max(3), rtol=1e-6)
        if p == 0:
            np.testing.assert_allclose(nn.AvgPool2d(k, s)(mx.array(x)), win.mean(3), rtol=1e-5)
    assert repr(nn.MaxPool1d(3, padding=2)) == "MaxPool1d(kernel_size=(3,), stride=(3,), padding=(2,))"
    up = nn.Upsample(scale_factor=2, mode="nearest")(mx.array(x))
    np.testing.assert_array_equal(up, x.repeat(2, axis=1).repeat(2, axis=2))
    lin = nn.Upsample(scale_factor=(0.5, 2), mode="linear", align_corners=True)(
        mx.arange(1, 5).reshape(1, 2, 2, 1))
    np.testing.assert_allclose(lin.reshape(-1), [1, 4 / 3, 5 / 3, 2], rtol=1e-6)


def test_positional_encodings_and_fast_match_numpy():
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 8)).astype(np.float32)
    for traditional in (False, True):
        got = nn.RoPE(8, traditional=traditional, base=10000)(mx.array(x), offset=2)
        pos = np.arange(2, 7, dtype=np.float64)[:, None]
        theta = pos * np.exp(-np.arange(4) * np.log(10000) / 4)
        c, s = np.cos(theta), np.sin(theta)
        x1, x2 = (x[..., 0::2], x[..., 1::2]) if traditional else (x[..., :4], x[..., 4:])
        r1, r2 = x1 * c - x2 * s, x1 * s + x2 * c
        want = np.stack([r1, r2], -1).reshape(x.shape) if traditional else np.concatenate([r1, r2], -1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    pe = nn.SinusoidalPositionalEncoding(8)(mx.arange(4))
    # MLX's form: frequencies from 1 down to 1e-4 evenly in log, scaled by sqrt(2 / dims).
    sig = np.exp((1 - np.arange(4) / 3) * (0 - np.log(1e-4)) + np.log(1e-4))
    freqs = np.arange(4)[:, None] * sig[None]
    np.testing.assert_allclose(pe, np.concatenate([np.sin(freqs), np.cos(freqs)], -1) * 0.5,
                               rtol=1e-5, atol=1e-5)
    assert nn.ALiBi()(mx.zeros((1, 4, 5, 5))).shape == (1, 4, 5, 5)
    q, k, v = (np.random.default_rng(i).standard_normal((1, 4, 3, 8)).astype(np.float32)
               for i in range(3))
    k2, v2 = k[:, :2], v[:, :2]  # grouped queries: 4 query heads over 2 key/value heads
    got = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k2), mx.array(v2), scale=0.5,
                                               mask="causal")
    s = np.einsum("bhld,bhmd->bhlm", q, np.repeat(k2, 2, axis=1)) * 0.5
    s = np.where(np.tril(np.ones((3, 3), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhlm,bhmd->bhld", p / p.sum(-1, keepdims=True), np.repeat(v2, 2, axis=1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    w = np.linspace(0.5, 1.5, 8).astype(np.float32)
    np.testing.assert_allclose(mx.fast.rms_norm(mx.array(q), mx.array(w), 1e-5),
                               q / np.sqrt((q ** 2).mean(-1, keepdims=True) + 1e-5) * w, rtol=1e-5)
    np.testing.assert_allclose(mx.fast.layer_norm(mx.array(q), mx.array(w), None, 1e-5),
                               (q - q.mean(-1, keepdims=True)) / np.sqrt(q.var(-1, keepdims=True) + 1e-5) * w,
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError):
        mx.fast.rope(mx.array(x), 7, traditional=False, base=10000.0, scale=1.0, offset=0)


def test_recurrent_layers_match_numpy():
    x = np.random.default_rng(3).standard_normal((2, 4, 3)).astype(np.float32)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    rnn = nn.RNN(3, 5)
    Wx, Wh, b = (np_of(rnn.Wxh), np_of(rnn.Whh), np_of(rnn.bias))
    h, hs = np.zeros((2, 5), np.float32), []
    for t in range(4):
        h = np.tanh(x[:, t] @ Wx.T + b + h @ Wh.T)
        hs.append(h)
    np.testing.assert_allclose(rnn(mx.array(x)), np.stack(hs, 1), rtol=1e-5, atol=1e-5)
    lstm = nn.LSTM(3, 5)
    Wx, Wh, b = (np_of(lstm.Wx), np_of(lstm.Wh), np_of(lstm.bias))
    h, c, hs = np.zeros((2, 5), np.float32), np.zeros((2, 5), np.float32), []
    for t in range(4):
        i, f, g, o = np.split(x[:, t] @ Wx.T + b + h @ Wh.T, 4, axis=-1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        hs.append(h)
    out_h, out_c = lstm(mx.array(x))
    np.testing.assert_allclose(out_h, np.stack(hs, 1), rtol=1e-5, atol=1e-5)
    gru = nn.GRU(3, 5)
    Wx, Wh, b, bhn = (np_of(gru.Wx), np_of(gru.Wh), np_of(gru.b), np_of(gru.bhn))
    h, hs = np.zeros((2, 5), np.float32), []
    for t in range(4):
        xr, xz, xn = np.split(x[:, t] @ Wx.T + b, 3, axis=-1)
        hr, hz, hn = np.split(h @ Wh.T, 3, axis=-1)
        r, z = sig(xr + hr), sig(xz + hz)
        n = np.tanh(xn + r * (hn + bhn))
        h = (1 - z) * n + z * h
        hs.append(h)
    np.testing.assert_allclose(gru(mx.array(x)), np.stack(hs, 1), rtol=1e-5, atol=1e-5)


def test_transformer_is_causal_and_trains_compiled():
    mx.random.seed(0)
    model = nn.Transformer(dims=16, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
                           mlp_dims=32, dropout=0.0)
    model.eval()
    src, tgt = mx.random.normal((2, 5, 16)), mx.random.normal((2, 4, 16))
    mask = nn.MultiHeadAttention.create_additive_causal_mask(4)
    out = model(src, tgt, None, mask, None)
    assert out.shape == (2, 4, 16)
    # Causal: the first target position does not see the later ones.
    tgt2 = mx.concatenate([tgt[:, :1], mx.random.normal((2, 3, 16))], axis=1)
    np.testing.assert_allclose(model(src, tgt2, None, mask, None)[:, 0], out[:, 0], rtol=1e-5,
                               atol=1e-5)
    enc = nn.TransformerEncoder(2, 16, 4, mlp_dims=32, norm_first=False, checkpoint=True)
    opt = optim.SGD(learning_rate=0.05)
    state = [enc.state, opt.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x):
        loss, grads = nn.value_and_grad(enc, lambda x: mx.mean(enc(x, None) ** 2))(x)
        opt.update(enc, grads)
        return loss

    x = mx.random.normal((3, 6, 16))
    first = step(x).item()
    for _ in range(5):
        last = step(x).item()
    assert last < first


def test_channel_dropout_and_init_sparse_orthogonal():
    x = mx.ones((2, 4, 5, 8))
    y = nn.Dropout2d(0.5)(x)
    kept = np.array(y)[:, 0, 0, :] != 0
    assert np.all((np.array(y) != 0) == kept[:, None, None, :])  # whole channels
    assert set(np.unique(np.array(y))) <= {0.0, 2.0}
    assert nn.Dropout3d(0.5)(mx.ones((2, 3, 4, 5, 6))).shape == (2, 3, 4, 5, 6)
    assert mx.array_equal(nn.Dropout2d(0.5).eval()(x), x).item()
    s = nn.init.sparse(0.3)(mx.zeros((5, 10)))
    assert (np.array(s) == 0).sum(axis=1).tolist() == [3] * 5
    for shape in ((4, 4), (6, 4), (3, 7)):
        q = np.array(nn.init.orthogonal()(mx.zeros(shape))).astype(np.float64)
        small = q.T @ q if shape[0] >= shape[1] else q @ q.T
        np.testing.assert_allclose(small, np.eye(min(shape)), atol=1e-5)


class _Shaped(nn.Module):
    """A module holding non-array values in its tree, as a VAE decoder or a Conv2d does."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 4)
        self.input_shape = [2, 2]  # a list of ints
        self.stride = (1, 1)       # a tuple of ints

    def __call__(self, x):
        return self.proj(x).reshape(-1, *self.input_shape)


def test_value_and_grad_and_compile_skip_non_array_members():
    m = _Shaped()
    loss = lambda m, x: mx.sum(m(x) ** 2)  # noqa: E731
    x = mx.ones((5, 3))
    value, grads = nn.value_and_grad(m, loss)(m, x)
    w, b = np_of(m.proj.weight), np_of(m.proj.bias)
    y = np.ones((5, 3), np.float32) @ w.T + b
    assert value.item() == pytest.approx((y ** 2).sum(), rel=1e-5)
    np.testing.assert_allclose(grads["proj"]["weight"], 2 * y.T @ np.ones((5, 3)), rtol=1e-5)
    assert m.input_shape == [2, 2] and m.stride == (1, 1)
    opt = optim.SGD(learning_rate=0.1)
    opt.init(m.trainable_parameters())
    state = [m.state, opt.state]

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x):
        v, g = nn.value_and_grad(m, loss)(m, x)
        opt.update(m, g)
        return v

    assert step(x).item() == pytest.approx(value.item(), rel=1e-5)
    np.testing.assert_allclose(m.proj.weight, w - 0.1 * np_of(grads["proj"]["weight"]), rtol=1e-5)
    assert m.input_shape == [2, 2] and m.stride == (1, 1) and step.cache_size == 1
    step(x)
    assert step.cache_size == 1
