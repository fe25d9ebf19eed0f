"""The grading command: read a class, grade each student in a worker of its own, publish the run."""
