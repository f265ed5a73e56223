// Package configtest checks that the docs describe a service's
// configuration as its code reads it.
//
// The docs' env tables are markdown tables with a "Variable" and a
// "Default" column, and optionally a "Service" column (a service name, a
// comma-separated list, "all"/"both", or empty to repeat the row above;
// without the column a row applies to every service). Each row names one
// variable in backticks. A default is written as the docs want a reader to
// type it: 10s, 1MiB, 8, true, a URL, or the name of another variable whose
// default it takes (`DATABASE_URL`).
//
// CheckDocs reads the service's Config from an empty environment, so the
// config.Reader learns every variable and its default (config.Reader.Vars),
// and fails the test when a variable the code reads has no row, when a
// row's default differs from the code's, or when a row names the service
// explicitly for a variable it does not read.
//
// Defaults, NamesBadVariables and Renamed are the steps of every service's
// own config test: the defaults are accepted, each bad value is refused
// naming its variable, and an old name still sets the new one with a
// warning. ReadsBack checks one variable both ways: a good value arrives,
// bad ones are refused by name. Part gives a kit package's ReadConfig, which returns no error,
// the read shape those steps take.
package configtest
