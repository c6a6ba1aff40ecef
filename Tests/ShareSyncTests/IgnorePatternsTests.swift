import ShareSync
import Testing

/// `.shareignore`'s rules, one by one (docs in IgnorePatterns): globs, anchors, folders, the first match deciding,
/// case, deletable patterns, comments and lines left out.
@Suite struct IgnorePatternsTests {
    @Test func globsMatchWithinAPartOrAcrossParts() {
        let patterns = IgnorePatterns(text: "*.tmp\nbuild/out\n**/cache/**\nlog?.txt\n[abc].md\n[!x-z]y\n")
        #expect(patterns.ignores("a.tmp") && patterns.ignores("deep/down/b.tmp"))
        #expect(!patterns.ignores("a.tmp.keep") && !patterns.ignores("atmp"))
        #expect(patterns.ignores("build/out") && patterns.ignores("src/build/out") && patterns.ignores("build/out/x.o"))
        #expect(!patterns.ignores("build/output") && !patterns.ignores("xbuild/out"))
        #expect(patterns.ignores("cache/a") && patterns.ignores("x/cache/y/z") && !patterns.ignores("cache"))
        #expect(patterns.ignores("log1.txt") && !patterns.ignores("log12.txt") && !patterns.ignores("log/.txt"))
        #expect(patterns.ignores("a.md") && patterns.ignores("c.md") && !patterns.ignores("d.md"))
        #expect(patterns.ignores("ay") && !patterns.ignores("xy") && !patterns.ignores("zy"))
    }

    @Test func aLeadingSlashAnchorsAndATrailingOneMeansFolders() {
        let patterns = IgnorePatterns(text: "/top.txt\nbuild/\n")
        #expect(patterns.ignores("top.txt") && !patterns.ignores("sub/top.txt"))
        #expect(patterns.ignores("build", folder: true) && !patterns.ignores("build", folder: false))
        #expect(patterns.ignores("src/build", folder: true) && patterns.ignores("src/build/a.o"))
    }

    @Test func theFirstMatchDecidesAndAnIgnoredFolderKeepsAllItHolds() {
        let patterns = IgnorePatterns(text: "!keep.log\n*.log\nvendor\n!vendor/mine.c\n")
        #expect(!patterns.ignores("keep.log") && patterns.ignores("other.log") && !patterns.ignores("x/keep.log"))
        #expect(patterns.ignores("vendor", folder: true) && patterns.ignores("vendor/mine.c"))
        // A negation listed after the pattern it would undo comes too late.
        let late = IgnorePatterns(text: "*.log\n!keep.log\n")
        #expect(late.ignores("keep.log"))
    }

    @Test func caseAndDeletablePrefixes() {
        let patterns = IgnorePatterns(text: "(?i)*.JPG\n(?d).DS_Store\n(?d)(?i)thumbs.db\nplain\n")
        #expect(patterns.ignores("a.jpg") && patterns.ignores("B.Jpg") && patterns.ignores("c.JPG"))
        #expect(patterns.isDeletable(".DS_Store") && patterns.isDeletable("x/Thumbs.DB"))
        #expect(!patterns.isDeletable("plain") && patterns.ignores("plain"))
        #expect(!patterns.isDeletable("a.jpg"))
    }

    @Test func commentsEmptyLinesAndWhatIsLeftOut() {
        let patterns = IgnorePatterns(text: "// Syncthing's comment\n# gitignore's\n\n   \n#include other\nx\r\n/\n")
        #expect(patterns.ignores("x") && !patterns.ignores("y"))
        #expect(patterns.problems.count == 2, "\(patterns.problems)")
        #expect(IgnorePatterns(text: "").isEmpty && !IgnorePatterns.none.ignores("anything"))
    }

    @Test func escapesAndBracketsThatAreNotSets() {
        let patterns = IgnorePatterns(text: "\\*literal\nodd[name\n")
        #expect(patterns.ignores("*literal") && !patterns.ignores("xliteral"))
        #expect(patterns.ignores("odd[name"))
    }

    /// `#include FILE` (Syncthing's): the file's patterns at that line, FILE relative to the file naming it, its
    /// patterns still from the folder's root; loops, depth, missing files and paths leaving the folder reported.
    @Test func includedFilesAddTheirPatternsWhereTheyAreNamed() {
        let files = [
            ".shareglobalignore": "*.bak\n#include conf/more\n",
            "conf/more": "!keep.log\n/build/\n#include deeper\n",
            "conf/deeper": "*.o\n",
        ]
        var asked: [String] = []
        let patterns = IgnorePatterns(text: "#include .shareglobalignore\n*.log\n") { path in
            asked.append(path)
            return files[path]
        }
        #expect(asked == [".shareglobalignore", "conf/more", "conf/deeper"])
        #expect(patterns.problems.isEmpty, "\(patterns.problems)")
        #expect(patterns.ignores("a.bak") && patterns.ignores("x/y.o") && patterns.ignores("other.log"))
        // In order: the included `!keep.log` comes before the root's `*.log`; `/build/` is anchored at the root.
        #expect(!patterns.ignores("keep.log") && patterns.ignores("build/a", folder: false))
        #expect(!patterns.ignores("conf/build/a"))
    }

    @Test func includesThatCannotBeFollowedAreReportedAndTheRestHolds() {
        let files = ["a": "#include b\n*.a\n", "b": "#include a\n*.b\n", "self": "#include /self\n"]
        let patterns = IgnorePatterns(
            text: "#include a\n#include missing\n#include ../outside\n#include .sharefolder/x\n#include\n"
                + "#include .shareignore\n#include self\n*.root\n"
        ) { files[$0] }
        #expect(patterns.ignores("x.a") && patterns.ignores("x.b") && patterns.ignores("x.root"))
        let problems = patterns.problems.joined(separator: "\n")
        #expect(patterns.problems.count == 7, "\(problems)")
        #expect(problems.contains("b line 1: #include a: included already"), "\(problems)")
        #expect(problems.contains("line 2: #include missing: no such file here"), "\(problems)")
        #expect(problems.contains("line 3: #include ../outside: not a file inside the folder"), "\(problems)")
        #expect(problems.contains("line 4: #include .sharefolder/x: not a file inside the folder"), "\(problems)")
        #expect(problems.contains("line 5: #include names no file"), "\(problems)")
        #expect(problems.contains("line 6: #include .shareignore: included already"), "\(problems)")
        #expect(problems.contains("self line 1: #include /self: included already"), "\(problems)")
        // A chain deeper than the limit stops there.
        var read = 0
        let chain = IgnorePatterns(text: "#include f0\n") { path in
            read += 1
            let n = Int(path.dropFirst())!
            return "#include f\(n + 1)\n*.x\(n)\n"
        }
        #expect(read == IgnorePatterns.includeDepth)
        #expect(chain.ignores("a.x0") && chain.ignores("a.x\(IgnorePatterns.includeDepth - 1)"))
        #expect(chain.problems.count == 1 && chain.problems[0].contains("more than 8 files deep"), "\(chain.problems)")
    }

    /// A synced pattern file (written by another device) naming thousands of files: at most 32 are read, the rest
    /// reported in one line, and the patterns read hold.
    @Test func aPatternFileNamingThousandsOfFilesIsFollowedOnlyThirtyTwoDeep() {
        let many = (0..<5000).map { "#include p\($0)" }.joined(separator: "\n")
        var read: [String] = []
        let patterns = IgnorePatterns(text: "#include list\n") { path in
            read.append(path)
            return path == "list" ? many : "*.\(path)\n"
        }
        #expect(read.count == IgnorePatterns.includedFiles, "\(read.count)")
        #expect(patterns.ignores("a.p0") && patterns.ignores("a.p30") && !patterns.ignores("a.p31"))
        #expect(patterns.problems.count == 1, "\(patterns.problems.count)")
        #expect(patterns.problems.first?.contains("list line 32: #include p31: more than 32 files included") == true)
    }
}
