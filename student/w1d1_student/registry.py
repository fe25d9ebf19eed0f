"""The one list of exercises, built from the notebook modules of `exercises/`.

NOTEBOOK_OF: grade_id -> the notebook it belongs to; `driver` and `verdict_table` give an exercise's driver and
verdict table. The grader's half of an exercise (cases and answer key) is in the module of the same name
under `autograder/exercises/`.

Every module is imported here, before any code of the student's can reach one of them: a driver captures
its watches (torch_calls.watching, AutogradUse) by value when it is imported, so a student who rebinds an
attribute of torch_calls first would otherwise blind a driver imported later. (A grading kernel imports
this module before the first cell: autograder/kernels/kernel_manager.py; `check` imports it with the package.)
"""
from . import driver
from .exercises import nb01_self_attention, nb02_scaled_dot_product, nb03_masks, nb04_multihead, nb05_complexity, nb06_api
from .torch_calls import AutogradUse

MODULES = (nb01_self_attention, nb02_scaled_dot_product, nb03_masks, nb04_multihead, nb05_complexity, nb06_api)
NOTEBOOK_OF = {gid: module.NOTEBOOK for module in MODULES for gid in module.EXERCISES}
# every text a result may hold: the words of driver.py, of the autograd watch and of each module's `WORDS`
VOCABULARY = driver.WORDS.union(AutogradUse.WORDS, *(getattr(module, "WORDS", ()) for module in MODULES))


def _make_lookups(tables):
    """topic, driver and verdict_table, reading `tables` (held in their closure, not looked up in this module's dict)."""

    def known(grade_id):
        if grade_id not in tables:
            raise KeyError(f"未知的练习：{grade_id!r}")
        return tables[grade_id]

    def topic(grade_id):
        """The module name of an exercise's notebook: 'nb03_masks'."""
        return known(grade_id)[0]

    def driver(grade_id):
        """The `Driver` of an exercise: how to run the student's code on one case."""
        return known(grade_id)[1]

    def verdict_table(grade_id):
        """The verdict table of an exercise (an engine.VerdictTable: table(cases, results) -> Verdict)."""
        return known(grade_id)[2]

    return topic, driver, verdict_table


# every exercise's (topic, driver, verdict table) as they are now, before any student code runs, held in the lookups'
# closure: a notebook that later rebinds an entry of a module's EXERCISES changes nothing a check uses
topic, driver, verdict_table = _make_lookups({gid: (module.__name__.rsplit(".", 1)[1], *module.EXERCISES[gid])
                                              for module in MODULES for gid in module.EXERCISES})
