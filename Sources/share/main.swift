import ShareCLI

ShareCommand.main()
