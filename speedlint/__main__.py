from speedlint.cli import main

main()
