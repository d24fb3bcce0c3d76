"""The audit report a person reads, built from a certificate (above the certificate, audit and
post-processing layers it draws on): :mod:`~dpopt.report.document` (figures and audit gathered),
:mod:`~dpopt.report.words` and :mod:`~dpopt.report.sections` (the content),
:mod:`~dpopt.report.render` (Markdown and HTML), :mod:`~dpopt.report.folder` (``dpopt solve --out``),
:mod:`~dpopt.report.data` and :mod:`~dpopt.report.plots` (the figures), and
:mod:`~dpopt.report.reading` (numbers and terms in words)."""
