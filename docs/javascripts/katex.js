// Typeset the maths that pymdownx.arithmatex (generic mode) leaves in the pages, \( ... \) inline
// and \[ ... \] displayed, each in an element of class "arithmatex", with the KaTeX the site ships
// (docs/assets/katex: nothing is fetched from the network). A formula KaTeX cannot parse is shown
// in red (class "katex-error"), which scripts/check_site.py looks for.
document$.subscribe(({ body }) => {
  for (const element of body.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  }
});
