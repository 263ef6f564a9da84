"""awrepl's Jupyter kernel: JupyterLab, Notebook, VS Code or ``jupyter console`` as one more client of a
named awrepl session, so a person's cells run in the very namespace an agent uses.

    python -m awrepl.kernel install --session agent --user     # registers the kernelspec "awrepl-agent"
    python -m awrepl.kernel -f CONNECTION_FILE --session agent  # what Jupyter runs

The kernel is built on ipykernel's ``Kernel`` base class (``_kernel``), which is imported only when a
kernel starts: importing this package, like ``import awrepl``, loads nothing of Jupyter.
"""

#: The magic a person types, on a cell of its own, to act on the session itself (``%awrepl reset``).
MAGIC = "%awrepl"
