"""The compute half of `fast` (fast.py): SCALE-Sim 3.0.0's operand/demand matrix builders
without their quadratic accumulation.

In compute/systolic_compute_{is,os,ws}.py, `create_{ifmap,filter}_prefetch_mat` and (is, os)
`create_{ifmap,filter,ofmap}_demand_mat` loop over folds and grow their matrix with

    if <first fold>:
        self.M = this_fold_X
    else:
        self.M = np.concatenate((self.M, this_fold_X), axis=0)

which copies everything built so far at every fold (BERT-base's FFN GEMMs on a 32x32 array
have 2,304 folds). `rewritten()` takes each such method's own source, checks that the pattern
is exactly that (the `if` tests that every enclosing fold loop is at its first value, 0), and
turns it into: the folds appended to a list inside the loops, joined by one `np.concatenate`
after the outermost loop. Same rows in the same order; `np.concatenate` of all folds at once
gives the dtype that the pairwise joins give (numpy's type promotion is associative over these
int and float arrays). Everything else in the method is upstream's code, run unchanged.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable

from scalesim.compute import systolic_compute_is, systolic_compute_os, systolic_compute_ws

SITES = {
    systolic_compute_is.systolic_compute_is: (
        "create_ifmap_prefetch_mat", "create_filter_prefetch_mat", "create_ifmap_demand_mat",
        "create_filter_demand_mat", "create_ofmap_demand_mat"),
    systolic_compute_os.systolic_compute_os: (
        "create_ifmap_prefetch_mat", "create_filter_prefetch_mat", "create_ifmap_demand_mat",
        "create_filter_demand_mat", "create_ofmap_demand_mat"),
    systolic_compute_ws.systolic_compute_ws: (
        "create_ifmap_prefetch_mat", "create_filter_prefetch_mat"),
}
PARTS = "_scalesim_fast_folds"


def _self_attr(node: ast.AST) -> str | None:
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self"):
        return node.attr
    return None


def _growth(node: ast.If) -> tuple[str, str] | None:
    """(attribute, fold variable) if `node` is the first-fold-or-concatenate pattern."""
    if len(node.body) != 1 or len(node.orelse) != 1:
        return None
    first, grow = node.body[0], node.orelse[0]
    if not (isinstance(first, ast.Assign) and isinstance(grow, ast.Assign)
            and isinstance(first.value, ast.Name)):
        return None
    attr, fold = _self_attr(first.targets[0]), first.value.id
    call = grow.value
    if not (attr and _self_attr(grow.targets[0]) == attr and isinstance(call, ast.Call)
            and ast.unparse(call.func) == "np.concatenate" and len(call.args) == 1
            and ast.unparse(call.args[0]) == f"(self.{attr}, {fold})"
            and [ast.unparse(k) for k in call.keywords] == ["axis=0"]):
        return None
    return attr, fold


def _first_iteration_test(test: ast.expr, loop_vars: list[str]) -> bool:
    """Is `test` `v == 0` for every enclosing loop variable (joined by `and`)?"""
    terms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    names = []
    for term in terms:
        if not (isinstance(term, ast.Compare) and isinstance(term.left, ast.Name)
                and len(term.ops) == 1 and isinstance(term.ops[0], ast.Eq)
                and ast.unparse(term.comparators[0]) == "0"):
            return False
        names.append(term.left.id)
    return sorted(names) == sorted(loop_vars)


def _rewrite_loop(loop: ast.For) -> str | None:
    """Replace the pattern inside `loop` (an outermost fold loop); the attribute, if found."""
    found: list[str] = []

    def visit(stmts: list[ast.stmt], loop_vars: list[str]) -> None:
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.For):
                iterates = ast.unparse(stmt.iter)
                if not (isinstance(stmt.target, ast.Name) and iterates.startswith("range(")
                        and "," not in iterates):   # range(n): starts at 0
                    continue
                visit(stmt.body, loop_vars + [stmt.target.id])
            elif isinstance(stmt, ast.If):
                growth = _growth(stmt)
                if growth and _first_iteration_test(stmt.test, loop_vars):
                    found.append(growth[0])
                    stmts[i] = ast.parse(f"{PARTS}.append({growth[1]})").body[0]

    visit([loop], [])
    if len(found) > 1:
        raise RuntimeError("more than one growing matrix in one loop")
    return found[0] if found else None


def rewritten(cls: type, name: str) -> Callable:
    """`cls.name` with its fold accumulation rewritten (see the module docstring)."""
    func = getattr(cls, name)
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    body = tree.body[0].body
    for i, stmt in reversed(list(enumerate(body))):
        if isinstance(stmt, ast.For):
            attr = _rewrite_loop(stmt)
            if attr:
                body[i + 1:i + 1] = ast.parse(
                    f"if {PARTS}:\n    self.{attr} = np.concatenate({PARTS}, axis=0)").body
                body.insert(i, ast.parse(f"{PARTS} = []").body[0])
                break
    else:
        raise RuntimeError(f"{cls.__name__}.{name}: SCALE-Sim's fold loop not found")
    ast.fix_missing_locations(tree)
    namespace: dict = {}
    exec(compile(tree, f"<benchmarks.scalesim.fast_compute {cls.__name__}.{name}>", "exec"),
         func.__globals__, namespace)
    return namespace[name]


def patches() -> dict[type, dict[str, Callable]]:
    """{class: {method name: rewritten method}} for `fast.patched()`."""
    return {cls: {name: rewritten(cls, name) for name in names} for cls, names in SITES.items()}
