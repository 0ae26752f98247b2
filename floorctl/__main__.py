from floorctl.cli import main

main()
