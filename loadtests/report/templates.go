package report

import (
	"strings"
	"text/template"
)

// execute renders the template name of tm (one of the report's template
// files, parsed at start: cards.tmpl, claims.tmpl, findings.tmpl,
// questions.tmpl) with data. The files are embedded and every name the
// code renders is checked by a test, so an error is a programming error:
// execute panics, naming the file.
func execute(tm *template.Template, name string, data any) string {
	var b strings.Builder
	if err := tm.ExecuteTemplate(&b, name, data); err != nil {
		panic("report: " + tm.Name() + ": " + err.Error())
	}
	return b.String()
}
