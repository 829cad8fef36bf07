_rmx() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="rmx"
                ;;
            rmx,agents)
                cmd="rmx__subcmd__agents"
                ;;
            rmx,alias)
                cmd="rmx__subcmd__alias"
                ;;
            rmx,bench)
                cmd="rmx__subcmd__bench"
                ;;
            rmx,chat)
                cmd="rmx__subcmd__chat"
                ;;
            rmx,completions)
                cmd="rmx__subcmd__completions"
                ;;
            rmx,doctor)
                cmd="rmx__subcmd__doctor"
                ;;
            rmx,embed)
                cmd="rmx__subcmd__embed"
                ;;
            rmx,help)
                cmd="rmx__subcmd__help"
                ;;
            rmx,import)
                cmd="rmx__subcmd__import"
                ;;
            rmx,info)
                cmd="rmx__subcmd__info"
                ;;
            rmx,launch)
                cmd="rmx__subcmd__launch"
                ;;
            rmx,list)
                cmd="rmx__subcmd__ls"
                ;;
            rmx,ls)
                cmd="rmx__subcmd__ls"
                ;;
            rmx,models)
                cmd="rmx__subcmd__models"
                ;;
            rmx,ps)
                cmd="rmx__subcmd__ps"
                ;;
            rmx,pull)
                cmd="rmx__subcmd__pull"
                ;;
            rmx,rm)
                cmd="rmx__subcmd__rm"
                ;;
            rmx,run)
                cmd="rmx__subcmd__run"
                ;;
            rmx,serve)
                cmd="rmx__subcmd__serve"
                ;;
            rmx,share)
                cmd="rmx__subcmd__share"
                ;;
            rmx,stop)
                cmd="rmx__subcmd__stop"
                ;;
            rmx,worker)
                cmd="rmx__subcmd__worker"
                ;;
            rmx__subcmd__alias,add)
                cmd="rmx__subcmd__alias__subcmd__add"
                ;;
            rmx__subcmd__alias,help)
                cmd="rmx__subcmd__alias__subcmd__help"
                ;;
            rmx__subcmd__alias,ls)
                cmd="rmx__subcmd__alias__subcmd__ls"
                ;;
            rmx__subcmd__alias,rm)
                cmd="rmx__subcmd__alias__subcmd__rm"
                ;;
            rmx__subcmd__alias__subcmd__help,add)
                cmd="rmx__subcmd__alias__subcmd__help__subcmd__add"
                ;;
            rmx__subcmd__alias__subcmd__help,help)
                cmd="rmx__subcmd__alias__subcmd__help__subcmd__help"
                ;;
            rmx__subcmd__alias__subcmd__help,ls)
                cmd="rmx__subcmd__alias__subcmd__help__subcmd__ls"
                ;;
            rmx__subcmd__alias__subcmd__help,rm)
                cmd="rmx__subcmd__alias__subcmd__help__subcmd__rm"
                ;;
            rmx__subcmd__help,agents)
                cmd="rmx__subcmd__help__subcmd__agents"
                ;;
            rmx__subcmd__help,alias)
                cmd="rmx__subcmd__help__subcmd__alias"
                ;;
            rmx__subcmd__help,bench)
                cmd="rmx__subcmd__help__subcmd__bench"
                ;;
            rmx__subcmd__help,chat)
                cmd="rmx__subcmd__help__subcmd__chat"
                ;;
            rmx__subcmd__help,completions)
                cmd="rmx__subcmd__help__subcmd__completions"
                ;;
            rmx__subcmd__help,doctor)
                cmd="rmx__subcmd__help__subcmd__doctor"
                ;;
            rmx__subcmd__help,embed)
                cmd="rmx__subcmd__help__subcmd__embed"
                ;;
            rmx__subcmd__help,help)
                cmd="rmx__subcmd__help__subcmd__help"
                ;;
            rmx__subcmd__help,import)
                cmd="rmx__subcmd__help__subcmd__import"
                ;;
            rmx__subcmd__help,info)
                cmd="rmx__subcmd__help__subcmd__info"
                ;;
            rmx__subcmd__help,launch)
                cmd="rmx__subcmd__help__subcmd__launch"
                ;;
            rmx__subcmd__help,ls)
                cmd="rmx__subcmd__help__subcmd__ls"
                ;;
            rmx__subcmd__help,models)
                cmd="rmx__subcmd__help__subcmd__models"
                ;;
            rmx__subcmd__help,ps)
                cmd="rmx__subcmd__help__subcmd__ps"
                ;;
            rmx__subcmd__help,pull)
                cmd="rmx__subcmd__help__subcmd__pull"
                ;;
            rmx__subcmd__help,rm)
                cmd="rmx__subcmd__help__subcmd__rm"
                ;;
            rmx__subcmd__help,run)
                cmd="rmx__subcmd__help__subcmd__run"
                ;;
            rmx__subcmd__help,serve)
                cmd="rmx__subcmd__help__subcmd__serve"
                ;;
            rmx__subcmd__help,share)
                cmd="rmx__subcmd__help__subcmd__share"
                ;;
            rmx__subcmd__help,stop)
                cmd="rmx__subcmd__help__subcmd__stop"
                ;;
            rmx__subcmd__help,worker)
                cmd="rmx__subcmd__help__subcmd__worker"
                ;;
            rmx__subcmd__help__subcmd__alias,add)
                cmd="rmx__subcmd__help__subcmd__alias__subcmd__add"
                ;;
            rmx__subcmd__help__subcmd__alias,ls)
                cmd="rmx__subcmd__help__subcmd__alias__subcmd__ls"
                ;;
            rmx__subcmd__help__subcmd__alias,rm)
                cmd="rmx__subcmd__help__subcmd__alias__subcmd__rm"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        rmx)
            opts="-h -V --help --version run chat embed serve ps stop completions pull ls list rm info models alias import bench agents doctor share launch worker help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__agents)
            opts="-y -h -V --setup --model --dry-run --yes --restore --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias)
            opts="-h -V --help --version add rm ls help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__add)
            opts="-h -V --tool-parser --reasoning-parser --context-length --kv-bits --kv-group-size --kv-quant-start --speculative --draft-tokens --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --tool-parser)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reasoning-parser)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context-length)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-bits)
                    COMPREPLY=($(compgen -W "4 8" -- "${cur}"))
                    return 0
                    ;;
                --kv-group-size)
                    COMPREPLY=($(compgen -W "32 64 128" -- "${cur}"))
                    return 0
                    ;;
                --kv-quant-start)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__help)
            opts="add rm ls help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__help__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__help__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__help__subcmd__rm)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__ls)
            opts="-h -V --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__alias__subcmd__rm)
            opts="-h -V --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__bench)
            opts="-h -V --prompt-tokens --gen-tokens --rounds --warmup --streams --json --json-schema --submit --kv-bits --kv-group-size --kv-quant-start --speculative --draft-tokens --verify-cost --image-cost --yes --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --prompt-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gen-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rounds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --warmup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --streams)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --json-schema)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-bits)
                    COMPREPLY=($(compgen -W "4 8" -- "${cur}"))
                    return 0
                    ;;
                --kv-group-size)
                    COMPREPLY=($(compgen -W "32 64 128" -- "${cur}"))
                    return 0
                    ;;
                --kv-quant-start)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify-cost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --image-cost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__chat)
            opts="-v -h -V --raw --max-tokens --temperature --top-p --top-k --seed --system --think --no-think --thinking-budget --verbose --keep-alive --kv-bits --kv-group-size --kv-quant-start --speculative --draft-tokens --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-k)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --system)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --thinking-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep-alive)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-bits)
                    COMPREPLY=($(compgen -W "4 8" -- "${cur}"))
                    return 0
                    ;;
                --kv-group-size)
                    COMPREPLY=($(compgen -W "32 64 128" -- "${cur}"))
                    return 0
                    ;;
                --kv-quant-start)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__completions)
            opts="-h -V --write --dir --help --version bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__doctor)
            opts="-h -V --json --hostfile --model --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --hostfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__embed)
            opts="-h -V --dimensions --query --prompt-name --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --dimensions)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help)
            opts="run chat embed serve ps stop completions pull ls rm info models alias import bench agents doctor share launch worker help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__agents)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__alias)
            opts="add rm ls"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__alias__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__alias__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__alias__subcmd__rm)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__bench)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__chat)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__completions)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__doctor)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__embed)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__import)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__info)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__launch)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__models)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__ps)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__pull)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__rm)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__share)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__stop)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__help__subcmd__worker)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__import)
            opts="-h -V --name --quant --force --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --quant)
                    COMPREPLY=($(compgen -W "4bit 8bit bf16 f32" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__info)
            opts="-h -V --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__launch)
            opts="-n -h -V --processes --hostfile --rank --mode --backend --coordinator-port --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --processes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hostfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rank)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mode)
                    COMPREPLY=($(compgen -W "tensor pipeline" -- "${cur}"))
                    return 0
                    ;;
                --backend)
                    COMPREPLY=($(compgen -W "ring nccl jaccl" -- "${cur}"))
                    return 0
                    ;;
                --coordinator-port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__ls)
            opts="-h -V --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__models)
            opts="-h -V --cached --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__ps)
            opts="-h -V --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__pull)
            opts="-h -V --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__rm)
            opts="-y -h -V --yes --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__run)
            opts="-v -h -V --image --raw --max-tokens --temperature --top-p --top-k --seed --system --think --no-think --thinking-budget --verbose --keep-alive --kv-bits --kv-group-size --kv-quant-start --speculative --draft-tokens --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --image)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-k)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --system)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --thinking-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep-alive)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-bits)
                    COMPREPLY=($(compgen -W "4 8" -- "${cur}"))
                    return 0
                    ;;
                --kv-group-size)
                    COMPREPLY=($(compgen -W "32 64 128" -- "${cur}"))
                    return 0
                    ;;
                --kv-quant-start)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__serve)
            opts="-h -V --host --port --api-key --background --kv-bits --kv-group-size --kv-quant-start --speculative --draft-tokens --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --host)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --api-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-bits)
                    COMPREPLY=($(compgen -W "4 8" -- "${cur}"))
                    return 0
                    ;;
                --kv-group-size)
                    COMPREPLY=($(compgen -W "32 64 128" -- "${cur}"))
                    return 0
                    ;;
                --kv-quant-start)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculative)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__share)
            opts="-h -V --host --port --cors-origin --rate-limit --tunnel --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --host)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --port)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cors-origin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rate-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tunnel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__stop)
            opts="-h -V --json --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        rmx__subcmd__worker)
            opts="-h -V --help --version"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _rmx -o nosort -o bashdefault -o default rmx
else
    complete -F _rmx -o bashdefault -o default rmx
fi
