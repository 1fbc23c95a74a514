@testable import TinyStorage

extension SimulatedDisk {
    /// How a crash treats what was not flushed. ``crash(seed:style:)`` picks one at random unless
    /// told; each is a state a real disk with a volatile write cache can leave.
    enum CrashStyle: String, CaseIterable, Sendable {
        /// Every sector a file's pending changes touched independently ends up as one of the
        /// versions it had (the durable one, or after any of the changes): lost, kept, kept out
        /// of order, torn at sector boundaries. The file's size is one of the sizes it had since
        /// its flush. Each directory keeps a random prefix of its pending namespace changes.
        case scrambled
        /// Each file keeps a random prefix of its pending changes, as a disk that writes in
        /// order would; each directory a random prefix of its namespace changes.
        case inOrder
        /// Everything pending reached the disk just before the power went.
        case keepsEverything
        /// Nothing pending reached the disk.
        case losesEverything
    }

    /// Stops this disk if it still runs (every later call fails with `EIO`) and returns the disk
    /// a power loss at that instant could leave, chosen by `seed`: per directory, its durable
    /// names plus a prefix of its pending namespace changes (a journal commits in order); per
    /// surviving file, its durable contents with its pending changes lost, kept or torn as
    /// `style` says. Bytes never written read as zeros. Everything on the new disk is durable,
    /// no descriptor is open, and its ``bootIdentity`` is new.
    ///
    /// With `reboot: false` it is the same loss without a restart: a disk that lost its write
    /// cache while the machine kept running (a removable or network disk cut off and attached
    /// again, a virtual machine's host), whose processes are gone; the ``bootIdentity`` stays, so
    /// the lock file's page comes back as the disk had it, from this boot.
    ///
    /// Can be called again with other seeds: the crashed state is kept.
    func crash(seed: UInt64, style: CrashStyle? = nil, reboot: Bool = true) -> SimulatedDisk {
        crashNow()
        var generator = SeededGenerator(seed: seed)
        let style = style ?? Self.randomStyle(using: &generator)
        let newBoot = BootIdentity(high: generator.next(), low: generator.next())
        let boot = reboot ? newBoot : withState { $0.boot }
        let survivor = withState { state in Self.survivor(of: state, style: style, seed: seed, boot: boot) }
        return SimulatedDisk(recovered: survivor, fileSystemType: fileSystemType)
    }

    /// The styles weighted so most crashes scramble, and every style comes up often.
    static func randomStyle(using generator: inout SeededGenerator) -> CrashStyle {
        switch Int.random(in: 0..<20, using: &generator) {
        case 0..<11: .scrambled
        case 11..<14: .inOrder
        case 14..<17: .keepsEverything
        default: .losesEverything
        }
    }

    /// What survives of `state`: the tree reachable from the root through surviving names.
    ///
    /// NB: each inode draws from its own generator, so the outcome does not depend on the order
    /// the tree is walked in (names of temporary files are random).
    private static func survivor(of state: State, style: CrashStyle, seed: UInt64, boot: BootIdentity) -> State {
        var result = State(boot: boot)
        result.nextInode = state.nextInode
        guard let oldRoot = state.nodes[State.rootInode] else { return result }
        let root = copy(oldRoot)
        root.parent = State.rootInode
        result.nodes[root.inode] = root
        var pending = [oldRoot]
        while let old = pending.popLast() {
            guard let directory = result.nodes[old.inode] else { continue }
            var generator = SeededGenerator(seed: seed ^ (old.inode &* 0x9E37_79B9_7F4A_7C15))
            let entries = survivingEntries(of: old, style: style, using: &generator)
            directory.entries = entries
            directory.durableEntries = entries
            for inode in entries.values {
                if let existing = result.nodes[inode] {
                    existing.linkCount += 1
                    continue
                }
                guard let oldChild = state.nodes[inode] else { continue }
                let child = copy(oldChild)
                child.parent = old.inode
                if child.kind == .regular {
                    var fileGenerator = SeededGenerator(seed: seed ^ (inode &* 0xD1B5_4A32_D192_ED03))
                    child.contents = survivingContents(of: oldChild, style: style, using: &fileGenerator)
                    child.durableContents = child.contents
                }
                if child.kind == .directory { pending.append(oldChild) }
                result.nodes[inode] = child
            }
        }
        return result
    }

    /// A node like `old`, without contents, names or open state.
    private static func copy(_ old: Node) -> Node {
        let node = Node(inode: old.inode, kind: old.kind, permissions: old.permissions, owner: old.owner)
        node.target = old.target
        return node
    }

    private static func survivingEntries(
        of node: Node, style: CrashStyle, using generator: inout SeededGenerator
    ) -> [String: UInt64] {
        let changes = node.pendingNamespace
        let kept: Int =
            switch style {
            case .keepsEverything: changes.count
            case .losesEverything: 0
            case .scrambled, .inOrder: Int.random(in: 0...changes.count, using: &generator)
            }
        var entries = node.durableEntries
        for change in changes.prefix(kept) { change.apply(to: &entries) }
        return entries
    }

    /// The contents a crash leaves of a file (see ``CrashStyle``).
    static func survivingContents(
        of node: Node, style: CrashStyle, using generator: inout SeededGenerator
    ) -> [UInt8] {
        let changes = node.pendingChanges
        guard !changes.isEmpty else { return node.durableContents }
        switch style {
        case .keepsEverything:
            return node.contents
        case .losesEverything:
            return node.durableContents
        case .inOrder:
            var contents = node.durableContents
            for change in changes.prefix(Int.random(in: 0...changes.count, using: &generator)) {
                Node.apply(change, to: &contents)
            }
            return contents
        case .scrambled:
            return scrambledContents(durable: node.durableContents, changes: changes, using: &generator)
        }
    }

    /// Each sector a change touched becomes one of its versions; the size one of the sizes.
    private static func scrambledContents(
        durable: [UInt8], changes: [FileChange], using generator: inout SeededGenerator
    ) -> [UInt8] {
        var current = durable
        var sizes = [durable.count]
        var versions: [Int: [[UInt8]]] = [:]
        for change in changes {
            let before = current.count
            Node.apply(change, to: &current)
            sizes.append(current.count)
            for sector in touchedSectors(by: change, sizeBefore: before, sizeAfter: current.count) {
                versions[sector, default: []].append(sectorBytes(current, sector))
            }
        }
        let size = sizes.randomElement(using: &generator) ?? durable.count
        var result = durable
        Node.resize(&result, to: size)
        for sector in versions.keys.sorted() {
            let start = sector * sectorSize
            guard start < size, let changed = versions[sector] else { continue }
            let choices = [sectorBytes(durable, sector)] + changed
            let chosen = choices.randomElement(using: &generator) ?? []
            // Bytes the chosen version did not have read as zeros.
            Node.place(chosen + [UInt8](repeating: 0, count: sectorSize - chosen.count), in: &result, at: start)
        }
        return result
    }

    private static func touchedSectors(by change: FileChange, sizeBefore: Int, sizeAfter: Int) -> [Int] {
        switch change {
        case .write(let offset, let bytes):
            guard !bytes.isEmpty else { return [] }
            return Array(offset / sectorSize...(offset + bytes.count - 1) / sectorSize)
        case .resize:
            guard sizeBefore != sizeAfter else { return [] }
            return Array(min(sizeBefore, sizeAfter) / sectorSize...(max(sizeBefore, sizeAfter) - 1) / sectorSize)
        case .mapped(let sectors):
            return sectors.map(\.sector)
        }
    }

    /// The bytes of `sector` in `contents` (fewer than a sector at the end, none past it).
    private static func sectorBytes(_ contents: [UInt8], _ sector: Int) -> [UInt8] {
        let start = sector * sectorSize
        guard start < contents.count else { return [] }
        return Array(contents[start..<min(start + sectorSize, contents.count)])
    }
}
