"""The serving loop's scalar interpolation gives numpy.interp's double exactly (the outputs
stay byte-identical), on random tables, on the nodes, outside them and on a flat segment."""

import numpy as np

from accelsim.llm.interp import interp1, table


def test_the_same_double_as_numpy_on_random_tables():
    rng = np.random.default_rng(7)
    for _ in range(300):
        xp = np.unique(rng.random(int(rng.integers(2, 30))) * rng.choice([1.0, 1e2, 1e5]))
        if len(xp) < 2:
            continue
        fp = rng.random(len(xp)) * rng.choice([1e-6, 1.0, 1e3])
        xs, ys = table(xp, fp)
        probes = np.concatenate([rng.uniform(-0.2, 1.2, 40) * xp[-1], xp])
        for x in probes:
            assert interp1(float(x), xs, ys) == float(np.interp(x, xp, fp))


def test_ends_nodes_and_a_flat_segment():
    xs, ys = [1.0, 2.0, 4.0], [10.0, 10.0, 30.0]
    assert interp1(0.5, xs, ys) == 10.0 and interp1(9.0, xs, ys) == 30.0  # the end values
    assert interp1(2.0, xs, ys) == 10.0 and interp1(4.0, xs, ys) == 30.0  # on the nodes
    assert interp1(1.5, xs, ys) == 10.0 and interp1(3.0, xs, ys) == 20.0  # flat, then linear
