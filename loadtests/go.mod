module github.com/where-postgres-ends/where-postgres-ends/loadtests

go 1.26
