from drafters.cli import main

main()
