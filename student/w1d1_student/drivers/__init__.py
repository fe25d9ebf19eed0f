"""How each exercise runs the student's code on one case (no reference implementation here).

Every driver is imported with this package, before any code of the student's can reach one of its
modules: a driver captures its watches (torch_calls.watching, AutogradUse) by value when it is
imported, so a student who rebinds an attribute of torch_calls first would otherwise blind a driver
imported later. (A grading kernel imports the package before the first cell: autograder/sandbox.py.)
"""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
