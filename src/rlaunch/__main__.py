from rlaunch.cli.admin import main

main()
