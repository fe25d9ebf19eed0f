"""The class report and the grade tables: read from the gradebook and the graded notebooks."""
